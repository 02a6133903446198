package vigil

// Version is the release of Vigil this source is, or follows: v0.1.0 is
// the first, whose files every later release opens (its fixtures are
// under testdata/format-*) and whose public API CI checks every change
// against (.ci/api, CHANGELOG.md). Between releases main keeps the last
// release's number; `vigil version` adds the commit it was built from.
const Version = "v0.1.0"
