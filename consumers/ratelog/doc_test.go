package ratelog_test

import (
	"fmt"
	"time"

	"github.com/personaq/personaq/consumers/ratelog"
)

func ExampleLimiter() {
	l := ratelog.New(time.Minute)
	for i := range 3 {
		if ok, held := l.Allow("ledger unreachable"); ok {
			fmt.Println("write line", i, "held back before it:", held)
		}
	}
	// Output: write line 0 held back before it: 0
}
