package main

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// fileID returns the device (as /proc/locks writes it, "maj:min" in hex) and
// inode of the file at path.
func fileID(path string) (string, uint64, bool) {
	st, err := os.Stat(path)
	if err != nil {
		return "", 0, false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return "", 0, false
	}
	dev := uint64(sys.Dev)
	return fmt.Sprintf("%02x:%02x", unix.Major(dev), unix.Minor(dev)), sys.Ino, true
}
