// Package manifest holds the LSM's shape: the metadata of each table
// (FileMetadata), the immutable set of tables per level (Version), the
// changes the MANIFEST records (VersionEdit, its encoding and its
// bounds-checked decoder) and the Builder that applies edits to a version.
//
// It does no I/O: the DB's version set writes edits to the MANIFEST (a
// record log of package wal) and installs the versions built here.
//
// Concurrency: a Version and the FileMetadata in it are immutable once
// built, and safe to share between goroutines; reference counts are atomic.
// A Builder and a VersionEdit belong to one goroutine.
//
// Invariants a built Version keeps (Build checks them and reports a
// violation as corruption, since only a corrupt MANIFEST or a bug can make
// one): L0 files are ordered newest first by largest seqnum; the files of
// each of L1..L6 are ordered by key and do not overlap; every file's
// smallest bound is at or before its largest; a file number appears at most
// once.
package manifest
