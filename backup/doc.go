// Package backup keeps incremental, verifiable backups of a Vigil DB in a
// backup directory, in the manner of RocksDB's BackupEngine with file
// checksums: tables are immutable, so each is copied once and shared by
// every backup that holds it, and every file of every backup has a
// whole-file checksum recorded in a checksummed meta file.
//
//	e, err := backup.Open("/backups/mydb", nil)  // locks the backup directory
//	info, stats, err := e.Create(db)             // db: an open *vigil.DB, writes may go on
//	infos, err := e.List()
//	err = e.Verify(info.ID)                      // re-reads every file of the backup
//	err = e.Restore(info.ID, "/data/mydb")       // the target must not exist
//	err = e.Delete(info.ID)
//	stats, err := e.GC()
//	err = e.Close()
//
// # Layout
//
//	LOCK                    held by the open Engine
//	shared/<num>_<size>_<cksum>_<ctx>.sst
//	                        tables, shared between backups
//	private/<id>/           each backup's CURRENT, MANIFEST-N, N.log and OPTIONS-N
//	meta/<id>               each backup's meta file: the commit point
//	staging/                Create's checkpoint, removed when Create ends
//
// A shared table's name holds its DB file number, its size, the whole-file
// checksum the DB's MANIFEST records for it (16 hex digits) and the random
// context value of its footer (8 hex digits), so that two different tables
// with the same number (from two DBs, or a DB created again) do not collide,
// and the same table backed up twice is stored once.
//
// A meta file (format version 2, see meta.go and testdata/meta-v2.golden)
// records the backup's id, creation time, the DB's sequence number, the
// range digest of all its live pairs (vigil.DB.Digest(nil, nil) of the
// backup's state) and every file of the backup with its size and
// CRC-64/Jones whole-file checksum; the meta file ends with a CRC-64 of
// itself. Its decoder bounds-checks every field and never panics.
//
// # Guarantees
//
// Create takes a vigil checkpoint into staging/ (so that its tables are hard
// links, not copies) and opens it read-only to record its sequence number
// and range digest; that open checks the checkpoint's MANIFEST, WAL and every
// table block. Each table not in shared/ yet is copied and checked as it is
// copied against its entry in the checkpoint's MANIFEST (size, the
// whole-file checksum of the bytes before its properties block) and,
// re-opened, against the checksums of its remaining blocks. Every file is
// synced, then its directory, then meta/<id> is written to a temporary
// file, synced, renamed and its directory synced. So a crash or an error in
// the middle of Create leaves at most files no meta lists, which the next
// Create or GC removes, and never a listed backup that is incomplete.
//
// Verify re-reads every file of a backup against its meta file. A flipped
// bit anywhere in a backup, in any file including the meta file, is reported
// as an error wrapping vigil.ErrCorruption that names the file. Restore
// verifies every file before copying it and again while copying it, writes
// the DB into a directory of its own beside the target (the target plus
// ".tmp-" and 16 random hex digits), opens that read-only and compares its
// range digest and sequence number with those recorded at backup time, and
// only then renames it to the target, unless the target exists by then: it
// never produces a DB that differs from the one backed up, nor replaces or
// removes anything it did not create; it fails, naming what differs, and
// leaves no target. Create does not re-read shared tables it reuses; Verify does.
//
// Delete removes the meta file first (durably), then the backup's private
// files, then the shared tables no other backup lists. GC removes shared
// tables no meta lists, private directories without a meta file and the
// leftovers of interrupted operations; while a meta file cannot be decoded
// it keeps every shared table, since they may belong to that backup.
//
// # Concurrency
//
// Create may run while the DB takes writes and reads: the backup holds
// exactly the writes visible when its checkpoint began, and the DB's writes
// wait only for the moment the checkpoint pins its state. The DB must not
// be opened ReadOnly, and Options.FS must be the DB's file system. An Engine
// holds the backup directory's LOCK from Open to Close, so a second Engine
// for the same directory, in this process or another, fails to Open with
// ErrLocked: two Creates on one backup directory never run at once, nor a
// Create and a Delete or GC. The methods of one Engine are safe for
// concurrent use and run one at a time. Restore targets need no lock, but
// must not exist.
//
// Errors wrap the vigil sentinels, tested with errors.Is: vigil.ErrCorruption
// for any damage, vigil.ErrNotFound for a backup that does not exist,
// vigil.ErrInvalidArgument for bad arguments, vigil.ErrClosed after Close;
// and ErrLocked.
package backup
