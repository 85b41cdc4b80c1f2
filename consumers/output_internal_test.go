package consumers

import (
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/schemas"
)

// sinkRecorder keeps what an attemptOutput publishes (its only I/O).
type sinkRecorder struct {
	mu     sync.Mutex
	chunks []*schemas.OutputChunk
}

func (s *sinkRecorder) Publish(subject string, data []byte) error {
	c, err := schemas.DecodeOutputChunk(data)
	if err != nil {
		return err
	}
	if subject != (Topology{}).WithDefaults().OutputSubject(c.RequestID, c.Attempt) {
		panic("chunk on " + subject)
	}
	s.mu.Lock()
	s.chunks = append(s.chunks, c)
	s.mu.Unlock()
	return nil
}

// TestAttemptOutput: what a writer is given comes out as whole chunks in
// order — offsets adding up, valid UTF-8 with no character split, the cap
// applied with one marker, the final chunk last — whatever the writes.
func TestAttemptOutput(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("é", 50<<10) // 100 KiB of two-byte characters
	tests := []struct {
		name   string
		writes []string
		max    int64
		// want is the text published; dropped the bytes counted over the cap.
		want    string
		dropped int64
		// maxChunks bounds the data chunks (coalescing); 0: no bound.
		maxChunks int
	}{
		{name: "Nothing", writes: nil, max: 1 << 20},
		{name: "EmptyWrites", writes: []string{"", ""}, max: 1 << 20},
		{name: "Tokens", writes: strings.SplitAfter(strings.Repeat("tok ", 2000), " "), max: 1 << 20,
			want: strings.Repeat("tok ", 2000), maxChunks: 8},
		{name: "CharacterAcrossWrites", writes: []string{"caf", "\xc3", "\xa9 ", "\xe2\x82", "\xac"}, max: 1 << 20, want: "café €"},
		{name: "InvalidBytes", writes: []string{"a\xffb"}, max: 1 << 20, want: "a\ufffdb"},
		{name: "LargeWriteSplit", writes: []string{big}, max: 1 << 20, want: big},
		{name: "Cap", writes: []string{strings.Repeat("x", 600), strings.Repeat("y", 600), "z"}, max: 1000,
			want: strings.Repeat("x", 600) + strings.Repeat("y", 400), dropped: 201},
		{name: "CapAtFirstWrite", writes: []string{strings.Repeat("x", 30)}, max: 10, want: strings.Repeat("x", 10), dropped: 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sink := &sinkRecorder{}
			log := zerolog.Nop()
			topo := Topology{Output: OutputTopology{AttemptMax: tt.max}}.WithDefaults()
			o := newAttemptOutput(sink, &topo, "req-1", 2, time.Now, &log)
			var counted []int64
			o.truncated = func(n int64) { counted = append(counted, n) }
			for _, w := range tt.writes {
				n, err := o.Write([]byte(w))
				require.NoError(t, err)
				require.Equal(t, len(w), n, "a write always reports all of it taken")
			}
			o.close()
			n, err := o.Write([]byte("after the end"))
			require.NoError(t, err)
			require.Equal(t, 13, n)
			o.close() // idempotent

			if tt.dropped > 0 {
				require.Equal(t, []int64{tt.dropped}, counted, "the observer counts the bytes dropped, once")
			} else {
				require.Empty(t, counted)
			}
			if tt.want == "" && tt.dropped == 0 {
				require.Empty(t, sink.chunks, "an attempt that wrote nothing publishes nothing")
				return
			}
			var text strings.Builder
			var markers, data int
			for i, c := range sink.chunks {
				require.Equal(t, 2, c.Attempt)
				require.Equal(t, int64(text.Len()), c.Offset, "chunk %d offset", i)
				require.True(t, utf8.ValidString(c.Data))
				require.LessOrEqual(t, len(c.Data), outputChunkMax)
				require.Equal(t, i == len(sink.chunks)-1, c.Final, "chunk %d: the final chunk is the last", i)
				if c.Truncated > 0 && !c.Final {
					markers++
					require.Empty(t, c.Data, "the marker carries no text")
				}
				if c.Data != "" {
					data++
				}
				text.WriteString(c.Data)
			}
			require.Equal(t, tt.want, text.String())
			require.Equal(t, tt.dropped, sink.chunks[len(sink.chunks)-1].Truncated, "the final chunk counts what was dropped")
			require.Equal(t, min(tt.dropped, 1), int64(markers), "one marker when over the cap")
			if tt.maxChunks > 0 {
				require.LessOrEqual(t, data, tt.maxChunks, "coalesced")
			}
		})
	}
}

func TestCompleteUTF8(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int
	}{{"", 0}, {"abc", 3}, {"ab\xc3", 2}, {"ab\xc3\xa9", 4}, {"\xe2\x82", 0}, {"a\xe2\x82\xac", 4}, {"a\xff", 2}, {"\xf0\x9f\x98", 0}} {
		require.Equal(t, tc.want, completeUTF8([]byte(tc.in)), "%q", tc.in)
	}
}

// An attempt's live output writer is made only by a Write: an attempt that
// writes none holds none while it runs, and a Write once the attempt
// ended is dropped, as a closed writer drops it.
func TestLiveOutputWriterIsMadeByTheFirstWrite(t *testing.T) {
	l := &lazyOutput{}
	l.close()
	require.Nil(t, l.w, "no writer made for an attempt that wrote nothing")
	n, err := l.Write([]byte("late"))
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Nil(t, l.w, "a write after the end makes no writer")
}
