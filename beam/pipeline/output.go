package pipeline

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/dpsql/dpsql/release/avgmix"
)

// partName is the staging file of part p.
func partName(dir string, p int) string {
	return strings.TrimRight(dir, "/") + fmt.Sprintf("/part-%05d", p)
}

// writeFn writes one staging part whole. Its input was committed upstream,
// so a retried write writes the same records.
type writeFn struct {
	Dir string
}

func (f *writeFn) ProcessElement(ctx context.Context, part int, recs func(*[]byte) bool) (err error) {
	name := partName(f.Dir, part)
	fs, err := filesystem.New(ctx, name)
	if err != nil {
		return fmt.Errorf("staging %s: %w", name, err)
	}
	defer fs.Close()
	w, err := fs.OpenWrite(ctx, name)
	if err != nil {
		return fmt.Errorf("staging %s: %w", name, err)
	}
	defer func() {
		if cerr := w.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("staging %s: %w", name, cerr)
		}
	}()
	bw := bufio.NewWriterSize(w, 1<<20)
	var rec []byte
	for recs(&rec) {
		if _, err := bw.Write(rec); err != nil {
			return fmt.Errorf("staging %s: %w", name, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("staging %s: %w", name, err)
	}
	return nil
}

// ReadAvgmix reads the staged release of plan from dir and calls emit once
// for each output t = 0..T-1, in the order the files hold them (x and y are
// reused after emit returns). It fails if an output is missing, repeated or
// malformed, so a partial release is never imported.
func ReadAvgmix(ctx context.Context, dir string, plan *avgmix.Plan, emit func(t int, x, y []float32) error) error {
	fs, err := filesystem.New(ctx, dir)
	if err != nil {
		return fmt.Errorf("staging %s: %w", dir, err)
	}
	defer fs.Close()
	files, err := fs.List(ctx, strings.TrimRight(dir, "/")+"/part-*")
	if err != nil {
		return fmt.Errorf("staging %s: %w", dir, err)
	}
	width := plan.D + plan.K
	seen := make([]bool, plan.T)
	got := 0
	rec := make([]byte, 4+4*width)
	row := make([]float32, width)
	for _, name := range files {
		rc, err := fs.OpenRead(ctx, name)
		if err != nil {
			return fmt.Errorf("staging %s: %w", name, err)
		}
		br := bufio.NewReaderSize(rc, 1<<20)
		for {
			_, err := io.ReadFull(br, rec)
			if err == io.EOF {
				break
			}
			if err != nil {
				rc.Close()
				return fmt.Errorf("staging %s: a truncated record: %w", name, err)
			}
			t := int(binary.LittleEndian.Uint32(rec))
			if t >= plan.T || seen[t] {
				rc.Close()
				return fmt.Errorf("staging %s: output %d is out of range or repeated", name, t)
			}
			seen[t] = true
			got++
			for i := range row {
				row[i] = math.Float32frombits(binary.LittleEndian.Uint32(rec[4+4*i:]))
			}
			if err := emit(t, row[:plan.D:plan.D], row[plan.D:]); err != nil {
				rc.Close()
				return err
			}
		}
		rc.Close()
	}
	if got != plan.T {
		return fmt.Errorf("staging %s: %d of the %d outputs are missing", dir, plan.T-got, plan.T)
	}
	return nil
}

// RemoveStaging deletes the staging parts in dir.
func RemoveStaging(ctx context.Context, dir string) error {
	fs, err := filesystem.New(ctx, dir)
	if err != nil {
		return err
	}
	defer fs.Close()
	files, err := fs.List(ctx, strings.TrimRight(dir, "/")+"/part-*")
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range files {
		if r, ok := fs.(filesystem.Remover); ok {
			errs = append(errs, r.Remove(ctx, f))
		}
	}
	return errors.Join(errs...)
}

func init() {
	register.DoFn3x1[context.Context, int, func(*[]byte) bool, error](&writeFn{})
	register.Iter1[[]byte]()
}
