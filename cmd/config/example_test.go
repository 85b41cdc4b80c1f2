package config_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/personaq/personaq/cmd/config"
)

func ExampleLoad() {
	dir, err := os.MkdirTemp("", "personaq")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "personaq.yaml")
	yaml := `
personas:
  planner:
    invoker: {type: http, url: "http://127.0.0.1:8081/planner"}
    policy: llm
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		panic(err)
	}
	env := map[string]string{ // os.LookupEnv in a real program
		"PERSONA_TIMEOUTS_JSON": `{"planner":45000}`,
		"PERSONAQ_REDIS_URL":    "redis://:secret@127.0.0.1:6379/0",
	}
	f, err := config.Load(path, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		fmt.Println(err)
		return
	}
	p := f.PersonaConfigs["planner"]
	fmt.Println("planner:", p.Invoker.Type, p.Policy.Preset, p.Timeout, "from", p.TimeoutSource())
	fmt.Println("redis:", config.RedactURL(f.Redis.URL))

	// Every problem is reported, each naming its field.
	_, err = config.Parse([]byte("topology: {replicas: 2}\npersonas:\n  planner:\n    invoker: {type: http}\n"), nil)
	fmt.Println(err)
	// Output:
	// planner: http llm 45s from PERSONA_TIMEOUTS_JSON
	// redis: redis://:***@127.0.0.1:6379/0
	// invalid config: topology.replicas: must be 1, 3 or 5, got 2
	// invalid config: personas.planner.invoker.url: required for type http
}
