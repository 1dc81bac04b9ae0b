package store

// As finds, in st or the stores it wraps (a wrapper has a method
// Unwrap() Store, as obs's does), the first that is a T: an optional
// part of the contract such as [AuditPager] or [Outbox], which a
// wrapper that embeds the Store interface hides. It reports false when
// none is.
func As[T any](st Store) (T, bool) {
	for range 16 { // wrappers of wrappers; a cycle ends here
		if v, ok := st.(T); ok {
			return v, true
		}
		u, ok := st.(interface{ Unwrap() Store })
		if !ok {
			break
		}
		if st = u.Unwrap(); st == nil {
			break
		}
	}
	var zero T
	return zero, false
}
