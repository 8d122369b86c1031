package sqlite

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWriteback checks the early writeback of a growing file: requests made
// while the file is written (and one merged with a pending one) leave its
// contents exactly as written and, after the last request, none of its pages
// dirty or under writeback (the kernel's cachestat); a file that cannot be
// opened gives a writeback that does nothing.
func TestWriteback(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db-wal")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	wb := StartWriteback(path)
	if wb == nil {
		t.Fatal("startWriteback returned nil on Linux")
	}
	var want bytes.Buffer
	block := make([]byte, 1<<16)
	for i := range 256 { // 16 MB
		for j := range block {
			block[j] = byte(i*31 + j)
		}
		if _, err := f.Write(block); err != nil {
			t.Fatal(err)
		}
		want.Write(block)
		if i%16 == 15 {
			wb.Start()
			wb.Start()
		}
	}
	wb.Start()
	wb.Stop()
	var cs unix.Cachestat_t
	if err := unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{}, &cs, 0); err != nil {
		t.Fatalf("cachestat: %v", err)
	}
	if cs.Dirty != 0 || cs.Writeback != 0 {
		t.Errorf("after the writeback the file has %d dirty pages and %d under writeback, want none", cs.Dirty, cs.Writeback)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("the file changed under writeback (%d bytes, want %d)", len(got), want.Len())
	}
	if w := StartWriteback(filepath.Join(t.TempDir(), "missing-wal")); w != nil {
		w.Stop()
		t.Fatal("a writeback of a missing file is not a no-op")
	}
	var none *Writeback
	none.Start()
	none.Stop()
}

// TestWritebackEvery checks the writeback that keeps running through a
// commit: once every is called, what is written afterwards, with no further
// request, is made durable (no page of the file dirty or under writeback)
// within seconds, where the kernel would otherwise leave it dirty for its
// 30-second expiry.
func TestWritebackEvery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "e.db-wal")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	wb := StartWriteback(path)
	defer wb.Stop()
	wb.Every(2 * time.Millisecond) // dp_avgmix's commitSyncEvery
	block := bytes.Repeat([]byte{7}, 1<<20)
	for range 16 {
		if _, err := f.Write(block); err != nil {
			t.Fatal(err)
		}
	}
	var cs unix.Cachestat_t
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if err := unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{}, &cs, 0); err != nil {
			t.Fatalf("cachestat: %v", err)
		}
		if cs.Dirty == 0 && cs.Writeback == 0 {
			return
		}
	}
	t.Errorf("5 s after writing 16 MB the file still has %d dirty pages and %d under writeback", cs.Dirty, cs.Writeback)
}
