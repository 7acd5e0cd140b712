package dynamo

// aInTag is a task's input ETag (split.Split.ETag), unquoted: the pin its
// reads carry as If-Match (blob.OpenPinned). The key and the tag share
// one budget (control.MaxInputKey), so pinning adds no bytes to the
// largest task record.
const aInTag = "it"

// aInVersion is a task's input version id (split.Split.Version), set when
// the input's bucket is versioned: its reads name that version. It shares
// the key's budget too (FitVersion).
const aInVersion = "iv"

// MaxVersionIDBytes bounds a pinned version id. S3 documents no length
// for version ids and gives them up to 1,024 bytes in its API shapes; the
// ones it issues are 32 bytes. A longer one is not pinned (FitVersion).
const MaxVersionIDBytes = 64

// PinBytes is what an input pin adds to a task record: its attribute's
// name and value. The planner counts it against the key's budget.
func PinBytes(etag string) int {
	if etag == "" {
		return 0
	}
	return len(aInTag) + len(etag)
}

// VersionPinBytes is what a version pin adds to a task record.
func VersionPinBytes(version string) int {
	if version == "" {
		return 0
	}
	return len(aInVersion) + len(version)
}

// FitVersion returns the version id a task of input key (pinned to etag)
// may record: version itself when it is at most MaxVersionIDBytes and the
// key, the ETag pin and the version pin fit MaxInputKeyBytes together,
// and "" otherwise. Without a version the input stays pinned by its ETag
// alone (If-Match): a change then fails the job instead of being read
// past, which is safe, so an outsized version id costs the job only the
// tolerance of overwrites, never a larger task record.
func FitVersion(key, etag, version string) string {
	if version == "" || len(version) > MaxVersionIDBytes ||
		len(key)+PinBytes(etag)+VersionPinBytes(version) > MaxInputKeyBytes {
		return ""
	}
	return version
}
