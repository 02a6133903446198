package main

import (
	"fmt"
	"syscall"
)

// fsType names the file system dir is on, by statfs's magic number.
func fsType(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "unknown file system"
	}
	switch uint64(st.Type) {
	case 0xEF53:
		return "ext2/3/4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x2FC12FC1:
		return "zfs"
	case 0x01021994:
		return "tmpfs"
	case 0x858458F6:
		return "ramfs"
	case 0x794C7630:
		return "overlayfs"
	case 0xF2F52010:
		return "f2fs"
	}
	return fmt.Sprintf("file system 0x%x", uint64(st.Type))
}
