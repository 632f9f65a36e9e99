package main

import "github.com/proxbus/proxbus/internal/app"

// trustFlags are serve's flags of sealed secrets and signed commands (contract §8, §8a).
type trustFlags struct {
	SealKeyFile           []string `name:"seal-key-file" help:"Files of proxbus's sealing keys (proxbus keys create): the current one first; during a rotation the old one second, still opened."`
	RequireSealedSecrets  bool     `name:"require-sealed-secrets" help:"Refuse a command with a plain secret field (422 secret_not_sealed; needs --seal-key-file)."`
	ProducersFile         string   `name:"producers-file" help:"YAML file mapping producer NKeys to the endpoints, verbs and actor prefix they may use (read again when it changes)."`
	RequireSignedCommands bool     `name:"require-signed-commands" help:"Refuse unsigned commands and commands outside their producer's rights (403 producer_not_allowed; needs --producers-file)."`
	FrontKeyFile          string   `name:"front-key-file" help:"NKey seed file the HTTP fronts sign their commands with (proxbus keys producer); list its key in --producers-file."`
}

// trust is the configuration the flags hold.
func (f trustFlags) trust() app.Trust {
	return app.Trust{SealKeyFiles: f.SealKeyFile, RequireSealedSecrets: f.RequireSealedSecrets,
		ProducersFile: f.ProducersFile, RequireSignedCommands: f.RequireSignedCommands, FrontKeyFile: f.FrontKeyFile}
}
