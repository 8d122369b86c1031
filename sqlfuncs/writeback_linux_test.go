package sqlfuncs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteback checks the early writeback of a growing file: requests made
// while the file is written (and one merged with a pending one) leave its
// contents exactly as written, and a file that cannot be opened gives a
// writeback that does nothing.
func TestWriteback(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db-wal")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	wb := startWriteback(path)
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
			wb.start()
			wb.start()
		}
	}
	wb.stop()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("the file changed under writeback (%d bytes, want %d)", len(got), want.Len())
	}
	if w := startWriteback(filepath.Join(t.TempDir(), "missing-wal")); w != nil {
		t.Fatal("a writeback of a missing file is not a no-op")
	}
	var none *writeback
	none.start()
	none.stop()
}
