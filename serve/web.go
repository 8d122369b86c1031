package serve

import (
	_ "embed"
	"net/http"
)

// page is the analysts' web page: sign in with a token, run SQL, see the
// result table, the scope's remaining budget as a bar and its spend over
// time. Plain HTML and JavaScript; the token stays in the tab's
// sessionStorage and goes out only in the Authorization header.
//
//go:embed web/index.html
var page []byte

func servePage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; form-action 'none'; frame-ancestors 'none'")
	_, _ = w.Write(page)
}
