package dynamo

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The translation to PartiQL knows the grammar the transitions render and
// refuses anything else, so a condition it cannot carry is never sent
// weakened.
func TestPartiQLCondition(t *testing.T) {
	t.Parallel()
	names := map[string]string{"#st": "st"}
	values := map[string]types.AttributeValue{":a": sv("A"), ":b": sv("B"), ":t": sv("T"), ":n": nv(1)}
	cases := []struct {
		expr, want string
		params     int
	}{
		{"#st IN (:a, :b) AND (tok = :t OR xtok = :t) AND (att = :n OR patt = :n)",
			`"st" IN [?, ?] AND ("tok" = ? OR "xtok" = ?) AND ("att" = ? OR "patt" = ?)`, 6},
		{"#st IN (:a)", `"st" IN [?]`, 1},
		{"((tok = :t))", `(("tok" = ?))`, 1},
		{"attribute_not_exists(pk)", "", 0},
		{"attribute_not_exists(pk) OR #st = :a", "", 0},
		{"lease < :n", "", 0},
		{"NOT tok = :t", "", 0},
		{"tok = :missing", "", 0},
		{"#other = :a", "", 0},
		{"tok = :t AND", "", 0},
		{"(tok = :t", "", 0},
		{"#st IN :a", "", 0},
		{"size(tok) = :n", "", 0},
		{"tok = xtok", "", 0},
	}
	for _, c := range cases {
		got, params, ok := partiQLCondition(c.expr, names, values)
		if ok != (c.want != "") || got != c.want || len(params) != c.params {
			t.Errorf("%q: %q (%d parameters, ok %v), want %q (%d)", c.expr, got, len(params), ok, c.want, c.params)
		}
	}
}
