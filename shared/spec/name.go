package spec

// ValidName reports whether v follows the rule for job and stage names
// (a letter or digit, then letters, digits, '_' and '-', at most
// MaxNameLen). Clients that build local paths from names the server
// returns check them with it: such a name cannot hold a path separator,
// "." or "..".
func ValidName(v string) bool {
	return v != "" && len(v) <= MaxNameLen && namePattern.MatchString(v)
}
