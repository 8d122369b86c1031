package main

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/term"
)

// tokenOut readies standard output for a secret, before the account exists,
// and says where the token goes, for the message that follows it. When
// standard output is a regular file (dpsql analyst add ... > alice.token) the
// file is made readable by its owner only, so the token never sits in a file
// others can read and the analyst's dpsql query --token-file does not warn
// about it.
func tokenOut(w io.Writer) (where string, err error) {
	f, ok := w.(*os.File)
	if !ok {
		return "its token, written to standard output,", nil
	}
	if term.IsTerminal(int(f.Fd())) {
		return "its token (above)", nil
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return "its token, written to standard output,", nil
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		if err := f.Chmod(perm &^ 0o077); err != nil {
			return "", fmt.Errorf("analyst add: the token would go to a file others can read, and it cannot be made private: %w (write it to a file of yours, or chmod 600 it first)", err)
		}
	}
	name := "the file standard output goes to"
	if p, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd())); err == nil {
		name = p
	}
	return fmt.Sprintf("its token, written to %s (readable by you only),", name), nil
}
