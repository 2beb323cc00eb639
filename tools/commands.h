/* commands.h: the subcommands of the qkv tool. Each returns the process exit status. */
#ifndef QKV_TOOLS_COMMANDS_H
#define QKV_TOOLS_COMMANDS_H

typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the command name */
} qkv_command;

int qkv_cmd_inspect(int argc, char **argv);
int qkv_cmd_train(int argc, char **argv);
int qkv_cmd_eval(int argc, char **argv);
int qkv_cmd_decode(int argc, char **argv);
int qkv_cmd_attn(int argc, char **argv);
int qkv_cmd_data(int argc, char **argv);
int qkv_cmd_list(int argc, char **argv);
int qkv_cmd_tokenizer(int argc, char **argv);
int qkv_cmd_score(int argc, char **argv);
int qkv_cmd_average(int argc, char **argv);
/* `qkv data baseline lm` (lm_baseline.c); argv[0] is "lm". */
int qkv_data_baseline_lm(int argc, char **argv);
/* `qkv data baseline mt-dict` (mt_dict_baseline.c); argv[0] is "mt-dict". */
int qkv_data_baseline_mt_dict(int argc, char **argv);

#endif
