package schemas_test

import (
	"errors"
	"fmt"

	"github.com/personaq/personaq/schemas"
)

func ExampleDecodeRequest() {
	req, err := schemas.DecodeRequest([]byte(`{
		"schema_version": 1,
		"request_id": "req-1",
		"task_id": "TASK-42",
		"step": "plan",
		"persona": "planner",
		"agents": {"primary": "claude", "fallback": "codex"},
		"created_at": "2025-03-04T05:06:07Z"
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(req.Persona, req.TaskID, req.Agents.Fallback, req.CreatedAt)
	// Output: planner TASK-42 codex 2025-03-04 05:06:07 +0000 UTC
}

func ExampleDecodeRequest_invalid() {
	_, err := schemas.DecodeRequest([]byte(`{
		"schema_version": 1,
		"request_id": "req-1",
		"task_id": "TASK-42",
		"step": "plan",
		"persona": "lead engineer",
		"created_at": "2025-03-04T05:06:07Z"
	}`))
	fmt.Println(err)

	var fe *schemas.FieldError
	if errors.As(err, &fe) {
		fmt.Println("field:", fe.Field)
	}
	fmt.Println("invalid:", errors.Is(err, schemas.ErrInvalid))
	// Output:
	// invalid message: persona: must match ^[A-Za-z0-9_-]+$
	// field: persona
	// invalid: true
}

func ExampleDecodeRequest_unknownVersion() {
	_, err := schemas.DecodeRequest([]byte(`{"schema_version": 2, "persona": "planner"}`))
	fmt.Println(err)
	fmt.Println(errors.Is(err, schemas.ErrUnknownVersion))
	// Output:
	// unknown schema version: schema_version 2 (this build knows 1)
	// true
}

func ExampleEncode() {
	req := schemas.NewRequest("TASK-42", "plan", "planner.v2")
	_, err := schemas.Encode(req)
	fmt.Println(err)
	// Output: encode *schemas.PersonaRequest: invalid message: persona: must match ^[A-Za-z0-9_-]+$
}
