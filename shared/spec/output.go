package spec

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// A job's output folder (Job.Output): where its final outputs are
// published, under final names with a _SUCCESS marker, when it succeeds
// (shared/control/publish.go). It is "s3://bucket/prefix/", or
// "outputs:<path>/" for a folder in the submitter's own outputs area of
// the data bucket (OutputsScheme), which the control plane resolves at
// submit, as it does inputs:<path>. Which folders an owner may name is the
// control plane's to check (shared/control/publish.go); here only the form.

// OutputsScheme starts an output folder in the submitter's outputs area
// ("outputs:wordcount/2026-11-23/"), resolved at submit to
// s3://<data bucket>/outputs/<owner key>/wordcount/2026-11-23/.
const OutputsScheme = "outputs:"

// OutputsAreaPrefixBytes is the length of an outputs area's prefix,
// "outputs/" + a 32-hex-digit owner key + "/".
const OutputsAreaPrefixBytes = len("outputs/") + 32 + 1

// MaxOutputFolder bounds an output folder's key prefix: the longest name
// published under it, <stage>/part-<5 digits>.parquet (longer than
// <stage>/part-<5 digits>-<5 digits>) with a stage name of MaxNameLen,
// must fit S3's 1,024-byte keys.
const MaxOutputFolder = maxKeyBytes - MaxNameLen - len("/part-00000.parquet")

// OutputsPath returns the path of an outputs: folder, and whether s is
// one.
func OutputsPath(s string) (string, bool) { return strings.CutPrefix(s, OutputsScheme) }

// checkOutput checks an output folder's form.
func checkOutput(errs *errorList, field, s string) {
	if s == "" {
		return
	}
	if err := outputForm(s); err != nil {
		errs.add(field, err.Error())
	}
}

func outputForm(s string) error {
	if path, ok := OutputsPath(s); ok {
		switch {
		case !utf8.ValidString(path):
			return fmt.Errorf("the path after %s must be valid UTF-8", OutputsScheme)
		case path == "" || path == "/":
			return fmt.Errorf("names your whole outputs area; name a folder in it: %s<path>/", OutputsScheme)
		case strings.HasPrefix(path, "/"):
			return fmt.Errorf("the path after %s is relative to your outputs area: drop the leading '/'", OutputsScheme)
		case !strings.HasSuffix(path, "/"):
			return fmt.Errorf("must end with '/': it names a folder (%s%s/)", OutputsScheme, path)
		case OutputsAreaPrefixBytes+len(path) > MaxOutputFolder:
			return fmt.Errorf("the path after %s is %d bytes; at most %d leave room for the names published under it",
				OutputsScheme, len(path), MaxOutputFolder-OutputsAreaPrefixBytes)
		}
		return checkSegments(path)
	}
	if !strings.HasPrefix(s, "s3://") {
		return fmt.Errorf("%q must have the form s3://bucket/prefix/, or %s<path>/ for a folder in your outputs area", s, OutputsScheme)
	}
	_, prefix, err := ParseS3URI(s)
	switch {
	case err != nil:
		return err
	case prefix == "":
		return fmt.Errorf("names a whole bucket; name a folder in it: s3://bucket/prefix/")
	case !strings.HasSuffix(prefix, "/"):
		return fmt.Errorf("must end with '/': it names a folder (%s/)", s)
	case len(prefix) > MaxOutputFolder:
		return fmt.Errorf("prefix is %d bytes; at most %d leave room for the names published under it", len(prefix), MaxOutputFolder)
	}
	return checkSegments(prefix)
}
