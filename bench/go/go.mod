module gortbench

go 1.19
