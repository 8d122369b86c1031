package protect

import (
	"strings"
	"testing"
)

// A policy that names a key twice, or in two cases, is refused: encoding/json
// would keep one of the two values, and which one another reader of the same
// text keeps is its own choice (issue 22).
func TestParsePolicyDuplicateKeys(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"privacy_unit": "pid", "max_groups": 1, "max_groups": 50}`, "appears twice"},
		{`{"privacy_unit": "pid", "max_rows": 1, "MAX_ROWS": 50}`, "differ only in case"},
		{`{"bounds": {"bmi": [10, 60], "BMI": [0, 1000]}}`, "differ only in case"},
	} {
		if _, err := ParsePolicy([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParsePolicy(%s): %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
	if p, err := ParsePolicy([]byte(`{"privacy_unit": "pid", "max_groups": 2, "max_length": {"name": 100}}`)); err != nil || p.MaxGroups != 2 || p.MaxLength["name"] != 100 {
		t.Errorf("a policy without duplicates: %+v, %v", p, err)
	}
}
