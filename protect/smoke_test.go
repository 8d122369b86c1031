package protect_test

import (
	"context"
	"testing"
)

func TestIssueExample(t *testing.T) {
	path, owner := newClinic(t, 10, `json_object('privacy_unit', 'pid', 'max_groups', 1, 'max_rows', 1)`,
		insertPatients(2000, func(i int) (int, string, int, any) {
			return i, []string{"F", "M"}[i%2], 10 + i%70, 20 + float64(i%10)
		}))
	a := openAnalyst(t, path)
	cols, rows, err := queryAll(context.Background(), a, issueExample)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(cols, rows, ledgerRows(t, owner))
	var params string
	owner.QueryRow(`SELECT params FROM dp_ledger`).Scan(&params)
	t.Log(params)
}
