package chatprep

func genLongCorpus() []signalCase           { return nil }
func genInjectionTextCorpus() []signalCase { return nil }
