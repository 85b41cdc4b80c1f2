package schemas

import (
	"strconv"
	"time"
)

// Live output: what an attempt writes while it runs, in chunks on the
// output stream (see OutputChunk).
const (
	// DefaultOutputStream holds live output chunks (memory storage,
	// bounded by age and bytes).
	DefaultOutputStream = "PERSONAQ_OUTPUT"
	// DefaultOutputPrefix: chunks go to <prefix>.<request key>.<attempt>.
	DefaultOutputPrefix = "personaq.output"
)

// OutputChunk is a piece of the live output one attempt of a request
// produced while it ran. An attempt's chunks are published in order; their
// Data concatenated in Offset order is what the attempt wrote, up to the
// cap. Chunks are for watching (memory storage, bounded retention, published
// without waiting for the server): the terminal record holds the output a
// caller acts on.
type OutputChunk struct {
	SchemaVersion int    `json:"schema_version"`
	RequestID     string `json:"request_id"`
	// Attempt is the attempt that wrote the chunk (1, 2, …).
	Attempt int `json:"attempt"`
	// Offset is how many UTF-8 bytes of this attempt's output came before
	// Data: a reader that holds fewer missed a chunk, one that holds more
	// has seen it already.
	Offset int64 `json:"offset"`
	// Data is the text (UTF-8; invalid bytes arrive as U+FFFD and the
	// offsets count what arrives). Empty on markers.
	Data string `json:"data"`
	// Truncated counts the bytes of this attempt's output dropped over the
	// cap so far: set on the one marker published when the cap is crossed
	// and on the final chunk.
	Truncated int64 `json:"truncated,omitempty"`
	// Final marks the attempt's last chunk (its handler returned). Only an
	// attempt that wrote something has one.
	Final bool `json:"final,omitempty"`
	// Supersedes is set on the marker that opens attempt 2 and later
	// (offset 0, no data): the output of every attempt up to this number
	// is void.
	Supersedes int `json:"supersedes,omitempty"`
	// At is when the chunk was published.
	At time.Time `json:"at"`
}

// DecodeOutputChunk decodes and validates an OutputChunk.
func DecodeOutputChunk(data []byte) (*OutputChunk, error) {
	return decode[OutputChunk](outputChunkSchema, data)
}

// MarshalOutputChunk returns c as json.Marshal writes it, byte for byte,
// without reflection: the runtime publishes a chunk every few milliseconds
// per streaming attempt. Like json.Marshal it does not validate c; an At
// json.Marshal refuses (a year outside 0–9999) is written as the zero time.
func MarshalOutputChunk(c *OutputChunk) []byte {
	b := make([]byte, 0, 160+len(c.RequestID)+len(c.Data)+len(c.Data)/8)
	return AppendOutputChunk(b, c)
}

// AppendOutputChunk appends MarshalOutputChunk(c) to b.
func AppendOutputChunk(b []byte, c *OutputChunk) []byte {
	if !strictTime(c.At) {
		c2 := *c
		c2.At = time.Time{} // json.Marshal would fail on it; no encoder writes such a time
		c = &c2
	}
	b = append(b, `{"schema_version":`...)
	b = strconv.AppendInt(b, int64(c.SchemaVersion), 10)
	b = appendField(b, `,"request_id":`, c.RequestID)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(c.Attempt), 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, c.Offset, 10)
	b = appendField(b, `,"data":`, c.Data)
	b = appendInt(b, `,"truncated":`, c.Truncated)
	if c.Final {
		b = append(b, `,"final":true`...)
	}
	b = appendInt(b, `,"supersedes":`, int64(c.Supersedes))
	b = append(b, `,"at":"`...)
	b = c.At.AppendFormat(b, time.RFC3339Nano)
	return append(b, `"}`...)
}

// OutputSubject is where the chunks of attempt of the request whose
// subject key is requestKey go, under prefix.
func OutputSubject(prefix, requestKey string, attempt int) string {
	return prefix + "." + requestKey + "." + strconv.Itoa(attempt)
}

// OutputFilter matches every chunk of the request whose subject key is
// requestKey, under prefix.
func OutputFilter(prefix, requestKey string) string {
	return prefix + "." + requestKey + ".*"
}
