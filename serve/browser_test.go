package serve_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/dpsql/dpsql/serve"
)

// findChromium returns Debian's chromium (or another Chrome) for the browser
// test. Under CI (the CI variable, which .ci/run sets) a missing browser
// fails the test instead of skipping it.
func findChromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH under CI: .ci/run installs it (apt-get install -y chromium)")
	}
	t.Skip("no chromium on PATH (outside CI): install it (apt-get install -y chromium) to run the browser test")
	return ""
}

// An analyst in a real (headless) browser signs in with a token, runs a DP
// query on the web page and reads the result; the budget bar and the spend
// chart follow the charge; a wrong token is refused on the page.
func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the browser test starts chromium")
	}
	chromium := findChromium(t)
	c := newClinic(t, 300, map[string]float64{"a": 2})
	tok := c.account(t, "alice", "a")
	_, hs := c.start(t, serve.Config{})

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.Flag("headless", true), chromedp.Flag("disable-gpu", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()

	err := chromedp.Do(ctx,
		chromedp.Navigate(hs.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), serve.TokenPrefix+"not-a-real-token"),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.CSS("#login-error:not(:empty)")),
	)
	if err != nil {
		t.Fatal(err)
	}
	loginError := text(ctx, t, chromedp.Text(chromedp.ID("login-error")))
	if !strings.Contains(loginError, "not that of an active account") {
		t.Errorf("wrong token: the page says %q", loginError)
	}

	// Signed in, the page lists what the analyst may query, and the query
	// box holds the service's example, on the table the database protects.
	listing, err := client(hs, tok).Tables(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	err = chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("token"), tok),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("app")),
		chromedp.Poll[chromedp.Void](`document.getElementById("tables-list").dataset.protected !== undefined`),
	)
	if err != nil {
		t.Fatal(err)
	}
	box := text(ctx, t, chromedp.Evaluate[string](`document.getElementById("sql").value`))
	headings := text(ctx, t, chromedp.Evaluate[string](`[...document.querySelectorAll("#tables-list h3")].map(h => h.textContent).join(",")`))
	if box != listing.Example || !strings.Contains(box, "FROM patients") {
		t.Errorf("the query box holds %q, want the service's example %q", box, listing.Example)
	}
	if headings != "patients (protected),wards (public)" {
		t.Errorf("the page lists the tables %q", headings)
	}

	const query = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS n FROM patients`
	err = chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("sql"), query),
		chromedp.Click(chromedp.ID("run")),
		chromedp.WaitVisible(chromedp.CSS("#result td")),
		chromedp.WaitVisible(chromedp.CSS("#spend circle")),
	)
	if err != nil {
		t.Fatal(err)
	}
	scope := text(ctx, t, chromedp.Text(chromedp.ID("scope")))
	header := text(ctx, t, chromedp.Text(chromedp.CSS("#result th")))
	cell := text(ctx, t, chromedp.Text(chromedp.CSS("#result td")))
	charge := text(ctx, t, chromedp.Text(chromedp.ID("charge")))
	width := text(ctx, t, chromedp.Evaluate[string](`document.getElementById("remaining-bar").style.width`))
	points := text(ctx, t, chromedp.Evaluate[string](`document.getElementById("spend").dataset.points`))
	n, err := strconv.Atoi(cell)
	// sigma = 1 for COUNT(*) at mu = 1: 300 ± 10 holds but for a 10-sigma draw.
	if err != nil || n < 290 || n > 310 || header != "n" || scope != "a" {
		t.Errorf("page shows scope %q, column %q, value %q; want a, n and a count near 300", scope, header, cell)
	}
	if !strings.Contains(charge, "charged mu 1") {
		t.Errorf("charge line %q", charge)
	}
	axes := text(ctx, t, chromedp.Evaluate[string](`[".axis-y", ".axis-x"].map(c => document.querySelector("#spend " + c).textContent).join(",")`))
	if axes != "mu spent,time of charge (UTC)" {
		t.Errorf("the spend chart's axis labels are %q", axes)
	}
	// mu 1 of 2 spent: a quarter of mu² used, 75% remains.
	if width != "75%" || points != "1" {
		t.Errorf("budget bar %q, spend chart points %q; want 75%% and 1", width, points)
	}
	if c.charges(t, "a") != 1 {
		t.Errorf("%d charges, want 1", c.charges(t, "a"))
	}

	// An (epsilon, delta) statement takes Laplace noise (no finite mu) and,
	// with OPTIONS confidence, shows each interval beside its value.
	const laplace = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, delta = 1e-6, confidence = 0.95) COUNT(*) AS n FROM patients`
	err = chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("sql"), laplace),
		chromedp.Click(chromedp.ID("run")),
		chromedp.WaitVisible(chromedp.CSS("#result td.interval")),
		chromedp.Poll[chromedp.Void](`document.getElementById("budget-text").textContent.includes("2 charges")`),
	)
	if err != nil {
		t.Fatal(err)
	}
	heads := text(ctx, t, chromedp.Evaluate[string](`[...document.querySelectorAll("#result th")].map(h => h.textContent + (h.className ? "*" : "")).join(",")`))
	charge = text(ctx, t, chromedp.Text(chromedp.ID("charge")))
	budget := text(ctx, t, chromedp.Text(chromedp.ID("budget-text")))
	if heads != "n,n_lo*,n_hi*" || !strings.Contains(charge, "charged Laplace noise") || !strings.Contains(budget, "no finite mu") {
		t.Errorf("Laplace statement: columns %q, charge %q, budget %q", heads, charge, budget)
	}
	// The spend chart cannot draw it (no finite mu): it is listed by its epsilon and delta, never as +Inf.
	err = chromedp.Do(ctx, chromedp.Poll[chromedp.Void](`document.getElementById("spend-laplace").textContent !== ""`))
	if err != nil {
		t.Fatal(err)
	}
	listed := text(ctx, t, chromedp.Text(chromedp.ID("spend-laplace")))
	if !strings.Contains(listed, "1 charge(s) with Laplace noise: row ") || !strings.HasSuffix(listed, ": epsilon 0.5, delta 0.000001.") ||
		strings.Contains(listed, "Inf") {
		t.Errorf("the spend chart's list of Laplace charges: %q", listed)
	}
}

// text runs a browser action that reads a string.
func text(ctx context.Context, t *testing.T, a chromedp.Action[string]) string {
	t.Helper()
	s, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
