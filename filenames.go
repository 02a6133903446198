package vigil

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/vfs"
)

// fileType classifies the files of a DB directory.
type fileType int

const (
	fileTypeUnknown  fileType = iota
	fileTypeLog               // NNNNNN.log: a WAL
	fileTypeTable             // NNNNNN.sst
	fileTypeManifest          // MANIFEST-NNNNNN
	fileTypeCurrent           // CURRENT
	fileTypeLock              // LOCK
	fileTypeOptions           // OPTIONS-NNNNNN
	fileTypeTemp              // NNNNNN.dbtmp: CURRENT being replaced
	fileTypeInfoLog           // LOG, LOG.old
)

func makeFilename(fs vfs.FS, dir string, ft fileType, num uint64) string {
	var name string
	switch ft {
	case fileTypeLog:
		name = fmt.Sprintf("%06d.log", num)
	case fileTypeTable:
		name = fmt.Sprintf("%06d.sst", num)
	case fileTypeManifest:
		name = fmt.Sprintf("MANIFEST-%06d", num)
	case fileTypeCurrent:
		name = "CURRENT"
	case fileTypeLock:
		name = "LOCK"
	case fileTypeOptions:
		name = fmt.Sprintf("OPTIONS-%06d", num)
	case fileTypeTemp:
		name = fmt.Sprintf("%06d.dbtmp", num)
	case fileTypeInfoLog:
		name = "LOG"
	default:
		panic("vigil: unknown file type")
	}
	return fs.PathJoin(dir, name)
}

// parseFilename classifies a file name (base name only).
func parseFilename(name string) (fileType, uint64, bool) {
	switch {
	case name == "CURRENT":
		return fileTypeCurrent, 0, true
	case name == "LOCK":
		return fileTypeLock, 0, true
	case name == "LOG" || name == "LOG.old":
		return fileTypeInfoLog, 0, true
	case strings.HasPrefix(name, "MANIFEST-"):
		n, err := strconv.ParseUint(name[len("MANIFEST-"):], 10, 64)
		return fileTypeManifest, n, err == nil
	case strings.HasPrefix(name, "OPTIONS-"):
		n, err := strconv.ParseUint(name[len("OPTIONS-"):], 10, 64)
		return fileTypeOptions, n, err == nil
	}
	dot := strings.LastIndexByte(name, '.')
	if dot <= 0 {
		return fileTypeUnknown, 0, false
	}
	n, err := strconv.ParseUint(name[:dot], 10, 64)
	if err != nil {
		return fileTypeUnknown, 0, false
	}
	switch name[dot:] {
	case ".log":
		return fileTypeLog, n, true
	case ".sst":
		return fileTypeTable, n, true
	case ".dbtmp":
		return fileTypeTemp, n, true
	}
	return fileTypeUnknown, 0, false
}
