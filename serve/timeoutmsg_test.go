package serve

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dpsql/dpsql/ledger"
	"github.com/dpsql/dpsql/protect"
)

// The 504 of a statement stopped after acceptance names its charge in the
// budget's terms: epsilon and delta for an (epsilon, delta) statement, never
// the "mu +Inf" of Laplace noise.
func TestTimeoutMessageNamesTheBudget(t *testing.T) {
	s := &Server{cfg: Config{StatementTimeout: 3 * time.Second}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		st   protect.Stopped
		want string
	}{
		{protect.Stopped{Receipt: ledger.Receipt{ID: 7, Mu: math.Inf(1)}, Epsilon: 0.5, Delta: 1e-6}, "(ledger row 7, epsilon 0.5, delta 1e-06)"},
		{protect.Stopped{Receipt: ledger.Receipt{ID: 8, Mu: 0.3}, Epsilon: 0.5, Delta: 1e-6}, "(ledger row 8, epsilon 0.5, delta 1e-06; Gaussian noise, mu 0.3)"},
		{protect.Stopped{Receipt: ledger.Receipt{ID: 9, Mu: 0.25}}, "(ledger row 9, mu 0.25)"},
	} {
		c.st.Err = context.Canceled
		w := httptest.NewRecorder()
		s.writeStatementError(w, &c.st, ctx)
		body := w.Body.String()
		if w.Code != http.StatusGatewayTimeout || !strings.Contains(body, c.want) || strings.Contains(body, "Inf") {
			t.Errorf("stopped statement: %d %s\n  want 504 naming %q", w.Code, body, c.want)
		}
	}
}
