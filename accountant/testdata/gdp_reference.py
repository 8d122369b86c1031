# Regenerates the reference values of gdp_test.go with mpmath at 40 digits:
#   python3 accountant/testdata/gdp_reference.py
from mpmath import mp, mpf, ncdf, log, exp, findroot
mp.dps = 40
def delta(mu, eps): return ncdf(-eps/mu + mu/2) - exp(eps)*ncdf(-eps/mu - mu/2)
for mu, eps in [(1, 1), (0.5, 0), (0.5016, 2), (2, 3), (0.1, 0.5), (5, 10), (0.01, 0.05)]:
    print("delta", mu, eps, mp.nstr(delta(mpf(mu), mpf(eps)), 20))
for x in [-5, -20, -37, -40, -100]:
    print("logPhi", x, mp.nstr(log(ncdf(x)), 25))
for e, d in [(2, 1e-5), (1, 1e-5), (0.5, 1e-6)]:
    print("mu", e, d, mp.nstr(findroot(lambda m: delta(m, mpf(e)) - mpf(d), 0.5), 20))
