module optc

go 1.26

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	github.com/yalue/onnxruntime_go v1.27.0 // indirect
	golang.org/x/sys v0.38.0
	google.golang.org/protobuf v1.36.12 // indirect
)
