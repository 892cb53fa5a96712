package pipeline

import "context"

type stopCheckKey struct{}

// WithStopCheck returns a context that carries check, a cheap in-process
// test of whether the job was stopped by an operator. The engine calls it
// before each stage and on every streamed chunk; it must not do network
// I/O. A non-nil result (normally a *StoppedError) ends the job.
func WithStopCheck(ctx context.Context, check func() error) context.Context {
	return context.WithValue(ctx, stopCheckKey{}, check)
}

// CheckStop runs the context's stop check, if any, and returns its result;
// it returns nil when the context carries none.
func CheckStop(ctx context.Context) error {
	if f, ok := ctx.Value(stopCheckKey{}).(func() error); ok && f != nil {
		return f()
	}
	return nil
}
