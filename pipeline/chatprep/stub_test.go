package chatprep

func genInjectionTextCorpus() []signalCase { return nil }
