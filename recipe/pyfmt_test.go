package recipe

import "testing"

// Python 3.11's repr() of each string, as it printed them.
func TestPyReprIsPythonRepr(t *testing.T) {
	for in, want := range map[string]string{
		"full_iteration": `'full_iteration'`,
		`it's`:           `"it's"`,
		`a"b`:            `'a"b'`,
		`a\b`:            `'a\\b'`,
		`it's "x"`:       `'it\'s "x"'`,
		`it's\`:          `"it's\\"`,
	} {
		if got := pyRepr(in); got != want {
			t.Errorf("pyRepr(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestPySetIsPythonSet(t *testing.T) {
	if got := pySet([]string{"expert_fc1"}); got != "{'expert_fc1'}" {
		t.Errorf("pySet = %s", got)
	}
	if got := pySet([]string{"expert_fc1", "moe_act"}); got != "{'expert_fc1', 'moe_act'}" {
		t.Errorf("pySet = %s", got)
	}
}
