package loadmodel

import (
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The clauses of an update expression. SET, REMOVE, ADD and DELETE are
// reserved words, so an attribute with one of these names can only
// appear as a #placeholder and a plain match on the words is safe.
var clauseRE = regexp.MustCompile(`(?i)\b(SET|REMOVE|ADD|DELETE)\b`)

// ParseUpdate reads an update expression: the top-level attributes its
// SET clause assigns a single value placeholder to (attribute -> ":v"),
// and those its REMOVE clause removes. Names are resolved through names
// (#placeholders); nested paths (a.b, a[0]) are left out.
func ParseUpdate(expr string, names map[string]string) (set map[string]string, removed []string) {
	set = map[string]string{}
	locs := clauseRE.FindAllStringSubmatchIndex(expr, -1)
	for i, loc := range locs {
		end := len(expr)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		body := expr[loc[1]:end]
		switch strings.ToUpper(expr[loc[2]:loc[3]]) {
		case "SET":
			for _, action := range splitTop(body) {
				path, value, ok := strings.Cut(action, "=")
				if !ok {
					continue
				}
				attr, ok := attrName(path, names)
				value = strings.TrimSpace(value)
				if ok && strings.HasPrefix(value, ":") && !strings.ContainsAny(value, " +-(),") {
					set[attr] = value
				}
			}
		case "REMOVE":
			for _, path := range splitTop(body) {
				if attr, ok := attrName(path, names); ok {
					removed = append(removed, attr)
				}
			}
		}
	}
	return set, removed
}

// splitTop splits s at the commas outside parentheses.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// attrName resolves a top-level attribute path ("#st", "gpk"); ok is
// false for nested paths.
func attrName(path string, names map[string]string) (string, bool) {
	path = strings.TrimSpace(path)
	if path == "" || strings.ContainsAny(path, ".[ ") {
		return "", false
	}
	if strings.HasPrefix(path, "#") {
		n, ok := names[path]
		return n, ok
	}
	return path, true
}

var equalityRE = regexp.MustCompile(`([#A-Za-z_][#\w]*)\s*=\s*(:\w+)`)

// QueryPartition is the partition key value a Query's key condition
// names: the value of "attr = :v" where attr (through names) is the
// partition key attribute (with attr unknown, the first equality); "" if
// there is none.
func QueryPartition(cond, attr string, names map[string]string, values map[string]types.AttributeValue) string {
	for _, m := range equalityRE.FindAllStringSubmatch(cond, -1) {
		if a, ok := attrName(m[1], names); ok && (a == attr || attr == "") {
			return attrString(values[m[2]])
		}
	}
	return ""
}

// insertRE matches a PartiQL INSERT of one item whose attributes are all
// parameters: INSERT INTO "t" VALUE {'a': ?, 'b': ?}.
var insertRE = regexp.MustCompile(`(?is)^\s*INSERT\s+INTO\s+"?([^"\s]+)"?\s+VALUE\s+\{(.*)\}\s*$`)

var insertAttrRE = regexp.MustCompile(`'([^']+)'\s*:\s*\?`)

// ParseInsert reads the table and the item of a PartiQL INSERT whose
// values are all parameters; ok is false for any other statement.
func ParseInsert(stmt string, params []types.AttributeValue) (table string, item map[string]types.AttributeValue, ok bool) {
	m := insertRE.FindStringSubmatch(stmt)
	if m == nil {
		return "", nil, false
	}
	names := insertAttrRE.FindAllStringSubmatch(m[2], -1)
	if len(names) != len(params) {
		return m[1], nil, false
	}
	item = make(map[string]types.AttributeValue, len(names))
	for i, n := range names {
		item[n[1]] = params[i]
	}
	return m[1], item, true
}

// updateStmtRE matches a PartiQL UPDATE of one item whose values are all
// parameters: UPDATE "t" SET "a" = ? SET "b" = ? REMOVE "c" WHERE "pk" = ? AND "sk" = ? AND (...).
var updateStmtRE = regexp.MustCompile(`(?is)^\s*UPDATE\s+"?([^"\s]+)"?\s+(.*?)\s+WHERE\s+(.*)$`)

var (
	stmtSetWordRE = regexp.MustCompile(`(?i)\bSET\b`)
	stmtSetRE     = regexp.MustCompile(`(?i)\bSET\s+"([^"]+)"\s*=\s*\?`)
	stmtRemoveRE  = regexp.MustCompile(`(?i)\bREMOVE\s+"([^"]+)"`)
	stmtEqualRE   = regexp.MustCompile(`^"([^"]+)"\s*=\s*\?(\s+AND\s+|\s*$)`)
)

// ParseUpdateStatement reads a PartiQL UPDATE as the store writes it: the
// table, the attributes it sets with their values, those it removes, and
// the equalities its WHERE starts with (the item's key among them, which
// the caller picks by the table's key names). ok is false for any other
// statement, or one whose parameters do not line up with it.
func ParseUpdateStatement(stmt string, params []types.AttributeValue) (table string, set, where map[string]types.AttributeValue, removed []string, ok bool) {
	m := updateStmtRE.FindStringSubmatch(stmt)
	if m == nil {
		return "", nil, nil, nil, false
	}
	sets := stmtSetRE.FindAllStringSubmatch(m[2], -1)
	if strings.Count(m[2], "?") != len(sets) || len(stmtSetWordRE.FindAllString(m[2], -1)) != len(sets) || len(params) < len(sets) {
		return m[1], nil, nil, nil, false
	}
	set = make(map[string]types.AttributeValue, len(sets))
	for i, s := range sets {
		set[s[1]] = params[i]
	}
	for _, r := range stmtRemoveRE.FindAllStringSubmatch(m[2], -1) {
		removed = append(removed, r[1])
	}
	where, rest, i := map[string]types.AttributeValue{}, m[3], len(sets)
	for e := stmtEqualRE.FindStringSubmatchIndex(rest); e != nil && i < len(params); e = stmtEqualRE.FindStringSubmatchIndex(rest) {
		where[rest[e[2]:e[3]]] = params[i]
		rest, i = rest[e[1]:], i+1
	}
	if e := stmtEqualRE.FindStringSubmatchIndex(rest); e != nil {
		return m[1], nil, nil, nil, false // more equalities than parameters
	}
	return m[1], set, where, removed, true
}
