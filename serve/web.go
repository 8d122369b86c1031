package serve

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"net/http"
)

// page is the analysts' web page: sign in with a token, run SQL, see the
// result table, the scope's remaining budget as a bar and its spend over
// time. Plain HTML and JavaScript; the token stays in the tab's
// sessionStorage and goes out only in the Authorization header.
//
//go:embed web/index.html
var page []byte

// pageCSP allows exactly the page's own inline script (by its SHA-256), its
// inline styles, and requests to this origin: an injected script would not
// run, and the page cannot be framed.
var pageCSP = func() string {
	const open, end = "<script>", "</script>"
	i := bytes.Index(page, []byte(open))
	j := bytes.LastIndex(page, []byte(end))
	if i < 0 || j < i {
		panic("serve: web/index.html has no <script> element")
	}
	sum := sha256.Sum256(page[i+len(open) : j])
	return "default-src 'none'; script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; style-src 'unsafe-inline'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
}()

func servePage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", pageCSP)
	_, _ = w.Write(page)
}
