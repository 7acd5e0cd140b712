package spec

import (
	"fmt"
	"strings"
)

// checkSegments refuses a key prefix (the part after the bucket or after
// inputs:/outputs:) with a ".", ".." or empty segment. S3 stores such keys
// literally, so they never leave the owner's area, but every tool that
// maps keys to paths (aws s3 sync, a FUSE mount, a local download)
// resolves them differently, and a folder that reads as two places is a
// trap. The last segment may be empty (a folder's trailing '/'); it may
// not be "." or "..", which no tool reads as a name prefix.
func checkSegments(prefix string) error {
	segs := strings.Split(prefix, "/")
	for i, seg := range segs {
		switch {
		case seg == "." || seg == "..":
			return fmt.Errorf("has a %q segment (%q); name the folder without \".\" and \"..\" segments", seg, prefix)
		case seg == "" && i < len(segs)-1:
			return fmt.Errorf("has an empty segment (%q); write one '/' between names", prefix)
		}
	}
	return nil
}
