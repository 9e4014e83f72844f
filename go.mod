module github.com/optc-dev/optc

go 1.26

require (
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.9
	github.com/yalue/onnxruntime_go v1.27.0
	golang.org/x/image v0.44.0
	golang.org/x/sys v0.38.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/text v0.40.0 // indirect
)
