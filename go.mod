module optc

go 1.26

require google.golang.org/protobuf v1.36.12 // indirect
