package participant

// SetTestHookActive sets the function Active runs while it holds its
// name's set (nil: none), for tests.
func SetTestHookActive(f func(name string)) { testHookActive = f }
