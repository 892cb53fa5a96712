package review

func genInjectionSuite() []outputCase { return nil }
