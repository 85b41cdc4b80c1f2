package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// jsonProblem says where data stops being JSON and why: "at line 2, column
// 14: invalid character '}' looking for beginning of object key string".
// Call it on data json.Valid refused.
func jsonProblem(data []byte) string {
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		line, col := lineCol(data, se.Offset)
		return fmt.Sprintf("at line %d, column %d: %v", line, col, se)
	case err != nil:
		return err.Error()
	}
	return "valid"
}

// lineCol turns a decoder's offset (bytes read, the offending one
// included) into the 1-based line and column (in bytes) of that byte.
func lineCol(data []byte, offset int64) (line, col int) {
	end := min(max(int(offset), 0), len(data))
	before := data[:end]
	line = bytes.Count(before, []byte("\n")) + 1
	col = end - (bytes.LastIndexByte(before, '\n') + 1)
	return line, max(col, 1)
}
