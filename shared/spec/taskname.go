package spec

// ValidTaskName reports whether v is a name a stage's task field accepts
// (checkTaskName): executors check the names they publish with it, since
// a registered name no spec can hold could never be run.
func ValidTaskName(v string) bool {
	return v != "" && len(v) <= MaxNameLen && taskPattern.MatchString(v)
}
