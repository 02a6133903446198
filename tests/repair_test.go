package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
)

// The repair sweep: a DB with tables in L0 and L6, range deletions, and
// synced writes only in its WAL is damaged in one file at a time (a bit
// flipped, the file truncated, the file deleted), for each kind of file;
// then Repair runs, and the DB must open, verify, and read: every key
// outside the ranges the report names reads its last acknowledged value;
// every key reads a value once written for it or nothing (Repair invents
// nothing); and a second Repair finds nothing to do.

// repairFixture is the undamaged DB in "base" and its model.
type repairFixture struct {
	fs vfs.FS
	// final is what each key reads; hist every value each key ever had.
	final map[string]string
	hist  map[string]map[string]bool
	// walKeys are the keys written only to the WAL (after the last flush).
	walKeys map[string]bool
}

func repairOptions(fs vfs.FS) *vigil.Options {
	return &vigil.Options{FS: fs, DisableAutomaticCompactions: true, BlockSize: 512, BloomBitsPerKey: 10,
		WriteBufferSize: 256 << 10, TargetFileSize: 24 << 10, BlockCacheSize: 1 << 20}
}

func newRepairFixture(t *testing.T) *repairFixture {
	t.Helper()
	fx := &repairFixture{fs: vfs.NewMem(), final: map[string]string{}, hist: map[string]map[string]bool{}, walKeys: map[string]bool{}}
	db, err := vigil.Open("src", repairOptions(fx.fs))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range 7 {
		fx.writeRound(t, db, rng, round, 500, false)
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		if round == 3 {
			if err := db.Compact(nil, nil); err != nil { // the first rounds go to L6
				t.Fatal(err)
			}
		}
	}
	fx.writeRound(t, db, rng, 7, 150, true)
	if err := db.Put([]byte("k-last"), []byte("synced"), &vigil.WriteOptions{Sync: true}); err != nil {
		t.Fatal(err)
	}
	fx.note("k-last", "synced", true)
	fx.walKeys["k-last"] = true
	// The image a crash would leave: tables, MANIFEST and the synced WAL.
	copyDir(t, fx.fs, "src", "base")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return fx
}

// writeRound writes n random puts and deletes and, in some rounds, a range
// deletion.
func (fx *repairFixture) writeRound(t *testing.T, db *vigil.DB, rng *rand.Rand, round, n int, wal bool) {
	t.Helper()
	for i := range n {
		k := fmt.Sprintf("k%05d", rng.IntN(2500))
		if wal {
			fx.walKeys[k] = true
		}
		if rng.IntN(10) == 0 {
			if err := db.Delete([]byte(k), nil); err != nil {
				t.Fatal(err)
			}
			fx.note(k, "", false)
			continue
		}
		v := fmt.Sprintf("v%d.%d.%s", round, i, strings.Repeat("x", rng.IntN(60)))
		if err := db.Put([]byte(k), []byte(v), nil); err != nil {
			t.Fatal(err)
		}
		fx.note(k, v, true)
	}
	if round%3 == 2 {
		lo := rng.IntN(2400)
		start, end := fmt.Sprintf("k%05d", lo), fmt.Sprintf("k%05d", lo+30)
		if err := db.DeleteRange([]byte(start), []byte(end), nil); err != nil {
			t.Fatal(err)
		}
		for k := range fx.final {
			if k >= start && k < end {
				delete(fx.final, k)
				if wal {
					fx.walKeys[k] = true
				}
			}
		}
	}
}

func (fx *repairFixture) note(k, v string, put bool) {
	if !put {
		delete(fx.final, k)
		return
	}
	fx.final[k] = v
	if fx.hist[k] == nil {
		fx.hist[k] = map[string]bool{}
	}
	fx.hist[k][v] = true
}

// damaged copies base to a new directory and damages file name there.
func (fx *repairFixture) damaged(t *testing.T, dir, name string, damage func(path string)) {
	t.Helper()
	copyDir(t, fx.fs, "base", dir)
	damage(fx.fs.PathJoin(dir, name))
}

// check runs Repair on dir and checks the promises above.
func (fx *repairFixture) check(t *testing.T, dir, what string) *vigil.RepairReport {
	t.Helper()
	return fx.checkWAL(t, dir, what, false, false)
}

// checkWAL is check; walCut says the WAL was cut short, which reads as the
// tail a crash leaves (not reported, as at Open): the keys only in the WAL
// may then read older values. unnamed says a table was deleted together
// with every record of it (the MANIFEST): nothing left names its loss, so
// only "nothing invented", Open and Verify are checked.
func (fx *repairFixture) checkWAL(t *testing.T, dir, what string, walCut, unnamed bool) *vigil.RepairReport {
	t.Helper()
	rep, err := vigil.Repair(dir, repairOptions(fx.fs))
	if err != nil {
		t.Fatalf("%s: Repair: %v", what, err)
	}
	db, err := vigil.Open(dir, repairOptions(fx.fs))
	if err != nil {
		t.Fatalf("%s: Open after Repair: %v", what, err)
	}
	defer db.Close()
	if err := db.Verify(); err != nil {
		t.Fatalf("%s: Verify after Repair: %v", what, err)
	}
	got, err := dump(db)
	if err != nil {
		t.Fatalf("%s: scan after Repair: %v", what, err)
	}
	walHit := walCut || len(rep.WALs) > 0 || rep.WALRecordsSkipped > 0
	for k, v := range got {
		if !fx.hist[k][v] {
			t.Fatalf("%s: %s reads %q, never written for it (report %+v)", what, k, v, rep)
		}
	}
	for k := range fx.hist {
		if unnamed || rep.MayHaveLost([]byte(k)) || (walHit && fx.walKeys[k]) {
			continue
		}
		want, ok := fx.final[k]
		if v, gok := got[k]; gok != ok || v != want {
			t.Fatalf("%s: %s reads %q (present %v), want %q (present %v), outside every reported range %v", what, k, v, gok, want, ok, rep.Lost)
		}
		g, err := db.Get([]byte(k))
		if (err == nil) != ok || (ok && string(g) != want) || (err != nil && !errors.Is(err, vigil.ErrNotFound)) {
			t.Fatalf("%s: Get(%s) = %q, %v; want %q", what, k, g, err, want)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := vigil.Repair(dir, repairOptions(fx.fs))
	if err != nil || !again.Clean() {
		t.Fatalf("%s: a second Repair: %v, %+v", what, err, again)
	}
	return rep
}

func (fx *repairFixture) files(t *testing.T, ext string) []string {
	var out []string
	for _, n := range mustList(t, fx.fs, "base") {
		if filepath.Ext(n) == ext || (ext == "MANIFEST" && strings.HasPrefix(n, "MANIFEST-")) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func flipByte(t *testing.T, fs vfs.FS, path string, off int64) {
	b := readAll(t, fs, path)
	b[off] ^= 1 << (off % 8)
	writeAll(t, fs, path, b)
}

func truncateTo(t *testing.T, fs vfs.FS, path string, n int64) {
	writeAll(t, fs, path, readAll(t, fs, path)[:n])
}

func fileSize(t *testing.T, fs vfs.FS, path string) int64 {
	st, err := fs.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestRepairClean: Repair of an undamaged DB changes nothing.
func TestRepairClean(t *testing.T) {
	fx := newRepairFixture(t)
	copyDir(t, fx.fs, "base", "clean")
	rep := fx.check(t, "clean", "undamaged")
	if !rep.Clean() || len(rep.Lost) != 0 || len(rep.MovedToLost) != 0 {
		t.Fatalf("undamaged DB: %+v", rep)
	}
}

// TestRepairSweepTables damages each table: bit flips over the file,
// truncation, deletion.
func TestRepairSweepTables(t *testing.T) {
	fx := newRepairFixture(t)
	rng := rand.New(rand.NewPCG(1, 1))
	tables := fx.files(t, ".sst")
	if len(tables) < 4 {
		t.Fatalf("fixture has %d tables", len(tables))
	}
	var lostBlocks, saved, cases int
	for ti, name := range tables {
		size := fileSize(t, fx.fs, fx.fs.PathJoin("base", name))
		offs := []int64{size - 1, size - 60, size / 2, rng.Int64N(size), rng.Int64N(size)}
		for _, off := range offs {
			dir := fmt.Sprintf("t%d-flip%d", ti, off)
			fx.damaged(t, dir, name, func(p string) { flipByte(t, fx.fs, p, off) })
			rep := fx.check(t, dir, dir)
			// A damaged filter or properties block loses nothing; lost
			// tombstones put the range in doubt with every entry saved.
			if len(rep.Tables) != 1 || (len(rep.Lost) == 0 && rep.EntriesSaved != rep.Tables[0].EntriesBefore) {
				t.Fatalf("%s: report %+v", dir, rep)
			}
			lostBlocks += rep.Tables[0].LostBlocks
			saved += int(rep.EntriesSaved)
			cases++
		}
		dir := fmt.Sprintf("t%d-trunc", ti)
		fx.damaged(t, dir, name, func(p string) { truncateTo(t, fx.fs, p, size/3) })
		if rep := fx.check(t, dir, dir); len(rep.Tables) != 1 {
			t.Fatalf("%s: report %+v", dir, rep)
		}
		dir = fmt.Sprintf("t%d-del", ti)
		fx.damaged(t, dir, name, func(p string) {
			if err := fx.fs.Remove(p); err != nil {
				t.Fatal(err)
			}
		})
		if rep := fx.check(t, dir, dir); len(rep.Tables) != 1 || !rep.Tables[0].Missing {
			t.Fatalf("%s: report %+v", dir, rep)
		}
		cases += 2
	}
	t.Logf("%d tables, %d damaged copies repaired: %d data blocks lost, %d entries salvaged", len(tables), cases, lostBlocks, saved)
}

// TestRepairSweepManifest damages the MANIFEST and CURRENT: the LSM is
// rebuilt from the tables, and no key is lost.
func TestRepairSweepManifest(t *testing.T) {
	fx := newRepairFixture(t)
	mf := fx.files(t, "MANIFEST")
	if len(mf) != 1 {
		t.Fatalf("MANIFESTs: %v", mf)
	}
	name := mf[0]
	size := fileSize(t, fx.fs, fx.fs.PathJoin("base", name))
	cases := map[string]func(p string){
		"delete":   func(p string) { _ = fx.fs.Remove(p) },
		"truncate": func(p string) { truncateTo(t, fx.fs, p, size/2) },
	}
	for i := range 8 {
		off := int64(i) * (size - 1) / 7
		cases[fmt.Sprintf("flip%d", off)] = func(p string) { flipByte(t, fx.fs, p, off) }
	}
	for what, damage := range cases {
		dir := "m-" + what
		fx.damaged(t, dir, name, damage)
		rep := fx.check(t, dir, dir)
		if !rep.ManifestRebuilt || !rep.Compacted || !onlyObsolete(rep) {
			t.Fatalf("%s: report %+v", dir, rep)
		}
	}
	for what, damage := range map[string]func(p string){
		"delete":  func(p string) { _ = fx.fs.Remove(p) },
		"garbage": func(p string) { writeAll(t, fx.fs, p, []byte("MANIFEST-9999\n")) },
	} {
		dir := "current-" + what
		fx.damaged(t, dir, "CURRENT", damage)
		if rep := fx.check(t, dir, dir); !rep.ManifestRebuilt || !onlyObsolete(rep) {
			t.Fatalf("%s: report %+v", dir, rep)
		}
	}
}

// onlyObsolete reports whether every table the report names is one a
// lost MANIFEST record may have deleted (nothing was damaged).
func onlyObsolete(rep *vigil.RepairReport) bool {
	for _, rt := range rep.Tables {
		if !rt.PossiblyObsolete {
			return false
		}
	}
	return true
}

// TestRepairSweepWAL damages the WAL: every record that verifies is kept,
// the report counts what was dropped, keys written before the WAL read
// their values.
func TestRepairSweepWAL(t *testing.T) {
	fx := newRepairFixture(t)
	logs := fx.files(t, ".log")
	// The oldest WAL holds the writes since the last flush; the newest is
	// the spare made ahead of the next rotation.
	name := logs[0]
	size := fileSize(t, fx.fs, fx.fs.PathJoin("base", name))
	offs := []int64{3, 12} // the header
	for i := range 6 {
		offs = append(offs, 200+int64(i)*(size-400)/5)
	}
	for _, off := range offs {
		dir := fmt.Sprintf("w-flip%d", off)
		fx.damaged(t, dir, name, func(p string) { flipByte(t, fx.fs, p, off) })
		rep := fx.check(t, dir, dir)
		if len(rep.WALs) != 1 || rep.WALs[0].DroppedRecords == 0 || len(rep.MovedToLost) != 1 {
			t.Fatalf("%s: report %+v", dir, rep)
		}
	}
	// A deleted WAL is named (the MANIFEST's log number, the OPTIONS file
	// saying the WAL was on), though not which keys it held.
	dir0 := "w-del"
	fx.damaged(t, dir0, name, func(p string) {
		if err := fx.fs.Remove(p); err != nil {
			t.Fatal(err)
		}
	})
	if rep := fx.check(t, dir0, dir0); len(rep.WALs) != 1 || rep.WALs[0].DroppedRecords != -1 {
		t.Fatalf("%s: report %+v", dir0, rep)
	}
	// A cut WAL reads as a torn tail, which a crash leaves: not damage,
	// nothing reported (and here the cut falls in the zeros the WAL
	// reserves ahead, so nothing is lost either: the check passes whole).
	dir := "w-trunc"
	fx.damaged(t, dir, name, func(p string) { truncateTo(t, fx.fs, p, size/2) })
	if rep := fx.check(t, dir, dir); len(rep.WALs) != 0 {
		t.Fatalf("%s: report %+v", dir, rep)
	}
}

// TestRepairReportJSON: the report's JSON names lost ranges in hex.
func TestRepairReportJSON(t *testing.T) {
	rep := &vigil.RepairReport{Lost: []vigil.LostRange{{FileNum: 7, First: []byte("a"), Why: "x"}}}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"first_hex":"61","last_hex":null`)) {
		t.Fatalf("%s", b)
	}
}

// TestRepairHealsFromBackup: with Options.HealFrom, Repair replaces a
// damaged table and a missing one by the backup's identical copies, and the
// DB's digest is the one before the damage: zero keys lost.
func TestRepairHealsFromBackup(t *testing.T) {
	fs, want := healFixture(t)
	tables := tablesOf(t, fs)
	flipAt(t, fs, fs.PathJoin("db", tables[0]), 200)
	if err := fs.Remove(fs.PathJoin("db", tables[2])); err != nil {
		t.Fatal(err)
	}
	rep, err := vigil.Repair("db", &vigil.Options{FS: fs, HealFrom: "bk"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tables) != 2 || !rep.Tables[0].Healed || !rep.Tables[1].Healed || len(rep.Lost) != 0 || rep.EntriesLost != 0 {
		t.Fatalf("report %+v", rep)
	}
	db, err := vigil.Open("db", &vigil.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got, err := db.Checksum(nil, nil); err != nil || got != want {
		t.Fatalf("digest after Repair %#x, %v; before the damage %#x", got, err, want)
	}
	// Without the backup the same damage loses the damaged block's range.
	fs2, _ := healFixture(t)
	flipAt(t, fs2, fs2.PathJoin("db", tables[0]), 200)
	rep, err = vigil.Repair("db", &vigil.Options{FS: fs2})
	if err != nil || len(rep.Tables) != 1 || rep.Tables[0].Healed || len(rep.Lost) == 0 {
		t.Fatalf("Repair without a backup: %+v, %v", rep, err)
	}
}

// TestRepairForeignTable: another DB's table copied over one of ours is
// not salvaged into the DB (that would invent its keys): ours is lost
// whole and reported, the file set aside.
func TestRepairForeignTable(t *testing.T) {
	fs := vfs.NewMem()
	for _, dir := range []string{"a", "b"} {
		db, err := vigil.Open(dir, &vigil.Options{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			db.Put(fmt.Appendf(nil, "%s%02d", dir, i), []byte(dir), nil)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		// Reopen: the WAL is flushed into a table at Open.
		db, err = vigil.Open(dir, &vigil.Options{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	ta, tb := tablesIn(t, fs, "a"), tablesIn(t, fs, "b")
	if len(ta) != 1 || len(tb) != 1 {
		t.Fatalf("tables %v %v", ta, tb)
	}
	writeAll(t, fs, fs.PathJoin("b", tb[0]), readAll(t, fs, fs.PathJoin("a", ta[0])))
	rep, err := vigil.Repair("b", &vigil.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tables) != 1 || rep.Tables[0].NewFileNum != 0 || rep.EntriesSaved != 0 || !rep.MayHaveLost([]byte("b05")) {
		t.Fatalf("report %+v", rep)
	}
	db, err := vigil.Open("b", &vigil.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, err := db.Get([]byte("a05")); !errors.Is(err, vigil.ErrNotFound) {
		t.Fatalf("a key of the other DB reads %q, %v", v, err)
	}
}

// failingFS fails the creation of a MANIFEST while fail is set.
type failingFS struct {
	vfs.FS
	fail bool
}

func (f *failingFS) Create(name string) (vfs.File, error) {
	if f.fail && strings.Contains(name, "MANIFEST-") {
		return nil, errors.New("injected: cannot create the MANIFEST")
	}
	return f.FS.Create(name)
}

// TestRepairInterrupted: a Repair that fails after salvaging, before its
// new MANIFEST, loses nothing: a second one salvages the same table again.
func TestRepairInterrupted(t *testing.T) {
	fx := newRepairFixture(t)
	tables := fx.files(t, ".sst")
	name := tables[len(tables)/2]
	size := fileSize(t, fx.fs, fx.fs.PathJoin("base", name))
	fx.damaged(t, "int", name, func(p string) { flipByte(t, fx.fs, p, size/2) })
	ffs := &failingFS{FS: fx.fs, fail: true}
	if _, err := vigil.Repair("int", &vigil.Options{FS: ffs}); err == nil {
		t.Fatal("Repair with the MANIFEST's creation failing succeeded")
	}
	rep := fx.check(t, "int", "after an interrupted Repair")
	if len(rep.Tables) != 1 || rep.EntriesSaved == 0 {
		t.Fatalf("report %+v", rep)
	}
}

// TestRepairManifestAndTable: the MANIFEST deleted and a table damaged at
// once: the LSM is rebuilt from the tables, the damaged one salvaged, and
// the promises hold.
func TestRepairManifestAndTable(t *testing.T) {
	fx := newRepairFixture(t)
	tables := fx.files(t, ".sst")
	mf := fx.files(t, "MANIFEST")
	for i, name := range tables {
		dir := fmt.Sprintf("both%d", i)
		size := fileSize(t, fx.fs, fx.fs.PathJoin("base", name))
		fx.damaged(t, dir, name, func(p string) { flipByte(t, fx.fs, p, size/3) })
		if err := fx.fs.Remove(fx.fs.PathJoin(dir, mf[0])); err != nil {
			t.Fatal(err)
		}
		rep := fx.check(t, dir, dir)
		if !rep.ManifestRebuilt || !rep.Compacted {
			t.Fatalf("%s: report %+v", dir, rep)
		}
	}
}

// TestRepairRandomDamage: one to three files damaged at once, each drawn
// from every file of the DB (tables, MANIFEST, CURRENT, WALs) with a random
// damage (a bit flipped anywhere, a truncation, a deletion), from 40 seeds
// (2,000 passed once, in 16 s); the promises hold for each, but two that
// nothing left can tell: a WAL cut short reads as a crash's tail, and a
// table deleted with the MANIFEST that named it is named by nothing.
func TestRepairRandomDamage(t *testing.T) {
	fx := newRepairFixture(t)
	var files []string
	for _, n := range mustList(t, fx.fs, "base") {
		if n != "LOG" && !strings.HasPrefix(n, "OPTIONS") {
			files = append(files, n)
		}
	}
	sort.Strings(files)
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 42))
		dir := fmt.Sprintf("rand%d", seed)
		copyDir(t, fx.fs, "base", dir)
		var what []string
		walCut, tableGone, manifestGone := false, false, false
		for range 1 + rng.IntN(3) {
			name := files[rng.IntN(len(files))]
			p := fx.fs.PathJoin(dir, name)
			st, err := fx.fs.Stat(p)
			if err != nil {
				continue // deleted by an earlier draw
			}
			switch r := rng.IntN(5); {
			case r < 3 && st.Size() > 0:
				off := rng.Int64N(st.Size())
				flipByte(t, fx.fs, p, off)
				what = append(what, fmt.Sprintf("%s flipped at %d", name, off))
				manifestGone = manifestGone || !strings.HasSuffix(name, ".sst") && !strings.HasSuffix(name, ".log")
			case r == 3:
				n := rng.Int64N(st.Size() + 1)
				truncateTo(t, fx.fs, p, n)
				what = append(what, fmt.Sprintf("%s cut to %d", name, n))
				walCut = walCut || strings.HasSuffix(name, ".log")
				tableGone = tableGone || strings.HasSuffix(name, ".sst")
				manifestGone = manifestGone || !strings.HasSuffix(name, ".sst") && !strings.HasSuffix(name, ".log")
			default:
				if err := fx.fs.Remove(p); err != nil {
					t.Fatal(err)
				}
				what = append(what, name+" deleted")
				tableGone = tableGone || strings.HasSuffix(name, ".sst")
				manifestGone = manifestGone || !strings.HasSuffix(name, ".sst") && !strings.HasSuffix(name, ".log")
			}
		}
		fx.checkWAL(t, dir, fmt.Sprintf("seed %d: %s", seed, strings.Join(what, ", ")), walCut, tableGone && manifestGone)
	}
}
