package spec

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// What a stage runs: exactly one of
//   - task: a function registered on the executor (Go, compiled in);
//   - exec: a program and its arguments, run on an executor host that
//     allows programs (the Fargate and local executors), the Hadoop
//     Streaming way: records on stdin, outputs on stdout;
//   - lambda: an existing Lambda function, in any runtime, that the
//     operator allows (a name or an ARN).

// Limits on an exec stage's command line. The program is a bare name: the
// executor looks it up only in its own programs directory, never on PATH
// and never by path, so a spec can run only what the operator installed
// there (internal/executor/execstage).
const (
	MaxExecArgs     = 64
	MaxExecArgBytes = 1024
	// MaxLambdaRef is the longest function reference Lambda's Invoke
	// accepts (an ARN with a qualifier).
	MaxLambdaRef = 170
)

var (
	programPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.+-]*$`)
	// A function name, with an optional version or alias; or its ARN.
	lambdaNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9_$-]{1,128})?$`)
	lambdaARNPattern  = regexp.MustCompile(`^arn:aws[a-z-]*:lambda:[a-z0-9-]+:[0-9]{12}:function:[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9_$-]{1,128})?$`)
)

// ValidProgramName reports whether name can be an exec stage's program:
// a bare name, as checkExec requires of exec[0].
func ValidProgramName(name string) bool {
	return name != "" && len(name) <= MaxNameLen && programPattern.MatchString(name)
}

// checkRunnable checks that stage s (at path p) says what it runs exactly
// once, and how.
func checkRunnable(errs *errorList, p string, s Stage) {
	var given []string
	if s.Task != "" {
		given = append(given, "task")
	}
	if s.Exec != nil {
		given = append(given, "exec")
	}
	if s.Lambda != "" {
		given = append(given, "lambda")
	}
	switch len(given) {
	case 0:
		// The common case, and the message specs have always had.
		errs.add(p+".task", "is required")
		return
	case 1:
	default:
		errs.add(p, fmt.Sprintf("give one of task, exec or lambda, not both (has %s)", strings.Join(given, " and ")))
		return
	}
	switch {
	case s.Task != "":
		checkTaskName(errs, p+".task", s.Task)
	case s.Exec != nil:
		checkExec(errs, p+".exec", s.Exec)
	default:
		checkLambda(errs, p+".lambda", s.Lambda)
	}
}

func checkExec(errs *errorList, field string, argv []string) {
	switch {
	case len(argv) == 0:
		errs.add(field, "want a program and its arguments, e.g. [wordcount.py, map]")
		return
	case len(argv) > MaxExecArgs:
		errs.add(field, fmt.Sprintf("has %d entries; at most %d are allowed", len(argv), MaxExecArgs))
		return
	}
	for i, a := range argv {
		f := field + "[" + strconv.Itoa(i) + "]"
		switch {
		case !utf8.ValidString(a):
			errs.add(f, "must be valid UTF-8")
		case strings.ContainsRune(a, 0):
			errs.add(f, "must not contain a NUL byte")
		case len(a) > MaxExecArgBytes:
			errs.add(f, fmt.Sprintf("is %d bytes; at most %d are allowed", len(a), MaxExecArgBytes))
		case i == 0 && a == "":
			errs.add(f, "want a program name")
		case i == 0 && (len(a) > MaxNameLen || !programPattern.MatchString(a)):
			errs.add(f, fmt.Sprintf("%q must be a program's bare name (letters, digits, '.', '_', '+' and '-', at most %d characters): "+
				"the executor runs only programs from its own programs directory, never a path", a, MaxNameLen))
		}
	}
}

func checkLambda(errs *errorList, field, ref string) {
	switch {
	case len(ref) > MaxLambdaRef:
		errs.add(field, fmt.Sprintf("must be at most %d characters", MaxLambdaRef))
	case !lambdaNamePattern.MatchString(ref) && !lambdaARNPattern.MatchString(ref):
		errs.add(field, fmt.Sprintf("%q must be a Lambda function name (optionally with :version or :alias) or a function ARN", ref))
	}
}
