// Package loop gives every background loop of personaq one lifecycle:
// a Group starts loops with a context that ends when the caller's does or
// when Stop is called; Stop is idempotent, safe before Start, and returns
// only once every goroutine the Group started has returned. Loops that
// wait between rounds use Sleep and Every, which end with their context.
//
// A loop that panics is never swallowed. By default the panic ends the
// process at once, as any goroutine's does. An owner that can do better
// (the runtime drains its in-flight work first) sets OnPanic: the panic is
// then recovered, the Group's other loops are asked to end, OnPanic hears
// of it at once, and Stop and Wait panic again with a *PanicError carrying
// the value and the loop's stack.
package loop
