package dynamo

// Commits, batched.
//
// A commit whose count is deferred (CountLinger: countbatch.go) is one
// conditional update of its task's record, whose answer it needs only as
// success or not. The commits a process makes at once go together as
// PartiQL UPDATEs in one BatchExecuteStatement (stmtbatch.go), each with
// the commit's own condition and changes, translated from the very
// expressions its UpdateItem sends (commitUpdate: the condition is the
// statemachine's), so the two cannot drift apart
// (TestBatchedCommitEqualsUpdate). A statement that does not succeed
// (refused: a stale or fenced attempt; throttled; the request failed) is
// not an outcome: the commit goes on to its UpdateItem, whose condition
// decides as it always did and whose refusal is explained as before; a
// statement that applied but whose answer was lost leaves the task
// SUCCEEDED by this very attempt and token, which explainCommit
// recognises as the commit's own.

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// commitRemoves are the attributes a commit removes (TaskCommit's
// UpdateItem: the lease, and a speculative copy's claim).
var commitRemoves = []string{aLease, aCopyTok, aCopyLease, aCopyEx}

// commitStatement is p's commit as a PartiQL UPDATE, for a commit that
// TaskCommit writes with its plain UpdateItem (not commitGuarded). ok is
// false when the expressions hold what the translation does not know; the
// commit then goes by UpdateItem alone.
func (s *Store) commitStatement(p CommitParams) (types.BatchStatementRequest, bool) {
	c := newCond()
	expr, set := commitUpdate(c, p)
	c.values[":cnt"] = ms(p.Now.Add(CountGrace))
	set += ", " + attrDue + " = :cnt"
	var b strings.Builder
	var params []types.AttributeValue
	b.WriteString(`UPDATE "` + s.table + `"`)
	for _, a := range strings.Split(strings.TrimPrefix(set, "SET "), ", ") {
		name, value, ok := strings.Cut(a, " = ")
		v, known := c.values[value]
		if !ok || !known {
			return types.BatchStatementRequest{}, false
		}
		n, ok := partiQLName(name, commitNames)
		if !ok {
			return types.BatchStatementRequest{}, false
		}
		b.WriteString(" SET " + n + " = ?")
		params = append(params, v)
	}
	for _, a := range commitRemoves {
		b.WriteString(` REMOVE "` + a + `"`)
	}
	b.WriteString(` WHERE "` + attrPK + `" = ? AND "` + attrSK + `" = ? AND (`)
	params = append(params, sv(taskPK(p.Ref)), sv(taskSK(p.Ref.Partition)))
	cond, condParams, ok := partiQLCondition(expr, commitNames, c.values)
	if !ok {
		return types.BatchStatementRequest{}, false
	}
	b.WriteString(cond + ")")
	return types.BatchStatementRequest{Statement: aws.String(b.String()), Parameters: append(params, condParams...)}, true
}

// partiQLCondition translates a condition expression of the grammar the
// store's transitions render (cond.go) into a PartiQL WHERE condition and
// its parameters in order:
//
//	cond    = term { ("AND" | "OR") term }
//	term    = "(" cond ")" | name "=" value | name "IN" "(" value { "," value } ")"
//
// ok is false on anything else (a function, another comparison, NOT, a
// name or value not bound), and the caller does without PartiQL.
func partiQLCondition(expr string, names map[string]string, values map[string]types.AttributeValue) (string, []types.AttributeValue, bool) {
	t := &condParser{toks: conditionTokens(expr), names: names, values: values}
	if !t.cond() || t.i != len(t.toks) {
		return "", nil, false
	}
	return t.out.String(), t.params, true
}

type condParser struct {
	toks   []string
	i      int
	names  map[string]string
	values map[string]types.AttributeValue
	out    strings.Builder
	params []types.AttributeValue
}

func (t *condParser) peek() string {
	if t.i < len(t.toks) {
		return t.toks[t.i]
	}
	return ""
}

func (t *condParser) cond() bool {
	if !t.term() {
		return false
	}
	for op := t.peek(); op == "AND" || op == "OR"; op = t.peek() {
		t.i++
		t.out.WriteString(" " + op + " ")
		if !t.term() {
			return false
		}
	}
	return true
}

func (t *condParser) term() bool {
	if t.peek() == "(" {
		t.i++
		t.out.WriteString("(")
		if !t.cond() || t.peek() != ")" {
			return false
		}
		t.i++
		t.out.WriteString(")")
		return true
	}
	name, ok := partiQLName(t.peek(), t.names)
	if !ok {
		return false
	}
	t.i++
	t.out.WriteString(name)
	switch t.peek() {
	case "=":
		t.i++
		t.out.WriteString(" = ")
		return t.value()
	case "IN":
		t.i++
		if t.peek() != "(" {
			return false
		}
		t.i++
		t.out.WriteString(" IN [")
		for first := true; ; first = false {
			if !first {
				if t.peek() != "," {
					break
				}
				t.i++
				t.out.WriteString(", ")
			}
			if !t.value() {
				return false
			}
		}
		if t.peek() != ")" {
			return false
		}
		t.i++
		t.out.WriteString("]")
		return true
	}
	return false
}

func (t *condParser) value() bool {
	v, ok := t.values[t.peek()]
	if !ok || !strings.HasPrefix(t.peek(), ":") {
		return false
	}
	t.i++
	t.out.WriteString("?")
	t.params = append(t.params, v)
	return true
}

// conditionTokens splits a condition expression into names, values,
// operators and parentheses.
func conditionTokens(expr string) []string {
	var toks []string
	cur := strings.Builder{}
	flush := func() {
		if cur.Len() > 0 {
			toks = append(toks, cur.String())
			cur.Reset()
		}
	}
	for _, r := range expr {
		switch r {
		case ' ':
			flush()
		case '(', ')', ',', '=':
			flush()
			toks = append(toks, string(r))
		default:
			cur.WriteRune(r)
		}
	}
	flush()
	return toks
}

// partiQLName is an attribute name as PartiQL quotes it: a placeholder
// resolved through names, or a plain name of letters and digits.
func partiQLName(tok string, names map[string]string) (string, bool) {
	if strings.HasPrefix(tok, "#") {
		n, ok := names[tok]
		if !ok {
			return "", false
		}
		tok = n
	}
	if tok == "" || tok == "AND" || tok == "OR" || tok == "IN" || tok == "NOT" {
		return "", false
	}
	for _, r := range tok {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return "", false
		}
	}
	return fmt.Sprintf("%q", tok), true
}
