package loadmodel

import (
	"regexp"
	"slices"
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
	sh := shapeOnce(stmt, true, insertShape)
	if !sh.matched {
		return "", nil, false
	}
	if !sh.ok || len(sh.sets) != len(params) {
		return sh.table, nil, false
	}
	item = make(map[string]types.AttributeValue, len(sh.sets))
	for i, n := range sh.sets {
		item[n] = params[i]
	}
	return sh.table, item, true
}

// insertShape is an INSERT's table and attribute names in parameter
// order (a value that is not a parameter leaves the names fewer than the
// parameters, which ParseInsert refuses).
func insertShape(stmt string) stmtShape {
	m := insertRE.FindStringSubmatch(stmt)
	if m == nil {
		return stmtShape{}
	}
	sh := stmtShape{matched: true, ok: true, table: m[1]}
	for _, n := range insertAttrRE.FindAllStringSubmatch(m[2], -1) {
		sh.sets = append(sh.sets, n[1])
	}
	return sh
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
	sh := shapeOnce(stmt, false, updateShape)
	if !sh.matched {
		return "", nil, nil, nil, false
	}
	if !sh.ok || len(params) < len(sh.sets)+len(sh.where) {
		return sh.table, nil, nil, nil, false
	}
	set = make(map[string]types.AttributeValue, len(sh.sets))
	for i, a := range sh.sets {
		set[a] = params[i]
	}
	where = make(map[string]types.AttributeValue, len(sh.where))
	for i, a := range sh.where {
		where[a] = params[len(sh.sets)+i]
	}
	return sh.table, set, where, slices.Clip(sh.removed), true // shared: an append copies
}

// updateShape is an UPDATE's table, the attributes its SET clauses
// assign parameters (ok false when a SET assigns anything else), those it
// removes, and the equalities its WHERE starts with.
func updateShape(stmt string) stmtShape {
	m := updateStmtRE.FindStringSubmatch(stmt)
	if m == nil {
		return stmtShape{}
	}
	sh := stmtShape{matched: true, table: m[1]}
	sets := stmtSetRE.FindAllStringSubmatch(m[2], -1)
	if strings.Count(m[2], "?") != len(sets) || len(stmtSetWordRE.FindAllString(m[2], -1)) != len(sets) {
		return sh
	}
	sh.ok = true
	for _, a := range sets {
		sh.sets = append(sh.sets, a[1])
	}
	for _, r := range stmtRemoveRE.FindAllStringSubmatch(m[2], -1) {
		sh.removed = append(sh.removed, r[1])
	}
	for rest, e := m[3], stmtEqualRE.FindStringSubmatchIndex(m[3]); e != nil; e = stmtEqualRE.FindStringSubmatchIndex(rest) {
		sh.where = append(sh.where, rest[e[2]:e[3]])
		rest = rest[e[1]:]
	}
	return sh
}
