package sqlfuncs

// ChargingFunctions are the SQL functions that write the ledger while the
// statement that calls them reads the file: they charge a budget, or create
// one. SQLite allows that in WAL mode only, so package ext switches a file
// to WAL mode just before a statement that calls one of them runs (reading
// a file never switches it).
var ChargingFunctions = []string{
	"dp_init", "dp_init_epsilon", "gdp_spend", "dp_gaussian", "dp_laplace", "dp_tlaplace", "dp_optnoise",
	"dp_vec_sum", "dp_avgmix", "dp_select_topm",
}
