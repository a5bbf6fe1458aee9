"""Wrong implementations of `parameters`: the classic registration, normalisation and optimizer
mistakes, each with the checks it must fail (see mutants/__init__.py). Mutants named
`correct_*` are right answers in another form and must fail nothing."""

from mutants import mutant_factory

M = mutant_factory("parameters")

MLP_ALL = ("mlp_registers_every_layer", "mlp_forward_matches_its_layers", "mlp_any_depth",
           "mlp_dropout_in_training_mode", "mlp_eval_mode_turns_dropout_off",
           "mlp_state_dict_round_trip", "mlp_follows_double", "mlp_graph_audit")
MLP_FORWARD = ("mlp_forward_matches_its_layers", "mlp_any_depth", "mlp_dropout_in_training_mode",
               "mlp_eval_mode_turns_dropout_off", "mlp_follows_double")
GROUPS_ALL = ("param_groups_head_and_base", "param_groups_nested_head_and_frozen",
              "param_groups_shared_parameter_in_one_group")
HEAD_ALL = ("replace_head_new_head_is_trained", "replace_head_with_frozen_features")
NORM_VALUES = ("running_norm_training_mode_matches_batchnorm",
               "running_norm_both_modes_step_after_step")
GROUPS_RETURN = ('return [{"params": base_params, "lr": base_lr}, '
                 '{"params": head_params, "lr": head_lr}]')
TIED_ALL = ("tied_autoencoder_has_one_shared_weight", "tied_autoencoder_forward",
            "tied_autoencoder_gradients_reach_the_shared_weight")


MUTANTS = [
    # ------------------------------------------------------------------ MLP
    M("mlp_plain_list_of_layers", """
class MLP(nn.Module):
    def __init__(self, in_dim, hidden, out_dim, dropout=0.0):
        super().__init__()
        widths = [in_dim, *hidden, out_dim]
        self.layers = [nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:])]
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = self.dropout(torch.relu(layer(x)))
        return self.layers[-1](x)
""", *MLP_ALL),
    M("mlp_final_layer_created_in_forward", """
class MLP(nn.Module):
    def __init__(self, in_dim, hidden, out_dim, dropout=0.0):
        super().__init__()
        layers, width = [], in_dim
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU(), nn.Dropout(dropout)]
            width = h
        self.body = nn.Sequential(*layers)
        self.width, self.out_dim = width, out_dim

    def forward(self, x):
        return nn.Linear(self.width, self.out_dim)(self.body(x))
""", *MLP_ALL),
    M("mlp_relu_after_last_layer", "",
      *MLP_FORWARD, replace=[("layers.append(nn.Linear(width, out_dim))",
                              "layers += [nn.Linear(width, out_dim), nn.ReLU()]")]),
    # The dropout check looks at active units only, so it does not see the missing ReLU.
    M("mlp_no_relu", "", "mlp_forward_matches_its_layers", "mlp_any_depth",
      "mlp_eval_mode_turns_dropout_off", "mlp_follows_double",
      replace=[("layers += [nn.Linear(width, h), nn.ReLU(), nn.Dropout(dropout)]",
                "layers += [nn.Linear(width, h), nn.Dropout(dropout)]")]),
    M("mlp_dropout_missing", "", "mlp_dropout_in_training_mode",
      replace=[("layers += [nn.Linear(width, h), nn.ReLU(), nn.Dropout(dropout)]",
                "layers += [nn.Linear(width, h), nn.ReLU()]")]),
    M("mlp_dropout_always_on", """
class MLP(nn.Module):
    def __init__(self, in_dim, hidden, out_dim, dropout=0.0):
        super().__init__()
        widths = [in_dim, *hidden, out_dim]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.p = dropout

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = F.dropout(F.relu(layer(x)), self.p)   # training=True whatever the mode
        return self.layers[-1](x)
""", "mlp_any_depth", "mlp_eval_mode_turns_dropout_off", "mlp_state_dict_round_trip",
      "mlp_follows_double"),
    M("mlp_dropout_keep_probability", "",
      "mlp_forward_matches_its_layers", "mlp_dropout_in_training_mode", "mlp_any_depth",
      replace=[("nn.Dropout(dropout)]", "nn.Dropout(1 - dropout)]")]),
    M("mlp_default_dropout_not_zero", "", "mlp_any_depth",
      replace=[("out_dim: int, dropout: float = 0.0)", "out_dim: int, dropout: float = 0.5)")]),
    M("mlp_dropout_on_the_input", "", "mlp_dropout_in_training_mode",
      replace=[("        layers: list[nn.Module] = []",
                "        layers: list[nn.Module] = [nn.Dropout(dropout)]")]),
    M("mlp_dropout_after_last_layer", "", "mlp_dropout_in_training_mode",
      replace=[("layers.append(nn.Linear(width, out_dim))",
                "layers += [nn.Linear(width, out_dim), nn.Dropout(dropout)]")]),
    M("mlp_output_layer_registered_first", """
class MLP(nn.Module):
    def __init__(self, in_dim, hidden, out_dim, dropout=0.0):
        super().__init__()
        widths = [in_dim, *hidden]
        self.out = nn.Linear(widths[-1], out_dim)
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        for layer in self.hidden:
            x = self.drop(torch.relu(layer(x)))
        return self.out(x)
""", "mlp_registers_every_layer", *MLP_FORWARD),
    M("mlp_needs_a_hidden_layer", """
class MLP(nn.Module):
    def __init__(self, in_dim, hidden, out_dim, dropout=0.0):
        super().__init__()
        layers = [nn.Linear(in_dim, hidden[0]), nn.ReLU(), nn.Dropout(dropout)]
        for a, b in zip(hidden[:-1], hidden[1:]):
            layers += [nn.Linear(a, b), nn.ReLU(), nn.Dropout(dropout)]
        self.net = nn.Sequential(*layers, nn.Linear(hidden[-1], out_dim))

    def forward(self, x):
        return self.net(x)
""", "mlp_any_depth"),
    M("correct_mlp_dropout_by_hand", """
class MLP(nn.Module):
    def __init__(self, in_dim, hidden, out_dim, dropout=0.0):
        super().__init__()
        widths = [in_dim, *hidden, out_dim]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.p = dropout

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
            if self.training and self.p > 0:
                keep = (torch.rand_like(x) >= self.p).to(x.dtype)
                x = x * keep / (1 - self.p)
        return self.layers[-1](x)
"""),
    M("correct_mlp_dropout_before_relu", "",
      replace=[("layers += [nn.Linear(width, h), nn.ReLU(), nn.Dropout(dropout)]",
                "layers += [nn.Linear(width, h), nn.Dropout(dropout), nn.ReLU()]")]),

    # ------------------------------------------------------------------ count_parameters
    M("count_parameters_shared_counted_twice", """
def count_parameters(model, trainable_only=False):
    return sum(p.numel() for m in model.modules() for p in m.parameters(recurse=False)
               if p.requires_grad or not trainable_only)
""", "count_parameters_shared_and_buffers"),
    M("count_parameters_reduce_without_a_start", """
def count_parameters(model, trainable_only=False):
    import functools
    import operator
    unique = {id(p): p for p in model.parameters() if p.requires_grad or not trainable_only}
    return functools.reduce(operator.add, (p.numel() for p in unique.values()))  # () -> TypeError
""", "count_parameters_shared_and_buffers"),
    M("mlp_squeezes_the_output", "", "mlp_any_depth",
      replace=[("        return self.net(x)", "        return self.net(x).squeeze()")]),
    M("count_parameters_counts_buffers", """
def count_parameters(model, trainable_only=False):
    n = sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
    return n + sum(b.numel() for b in model.buffers())
""", "count_parameters_shared_and_buffers"),
    M("count_parameters_counts_state_dict", """
def count_parameters(model, trainable_only=False):
    return sum(v.numel() for k, v in model.state_dict(keep_vars=True).items()
               if v.requires_grad or not trainable_only)
""", "count_parameters_shared_and_buffers"),
    M("count_parameters_children_only", """
def count_parameters(model, trainable_only=False):
    params = {id(p): p for child in model.children() for p in child.parameters()}
    return sum(p.numel() for p in params.values() if p.requires_grad or not trainable_only)
""", "count_parameters_nested_and_frozen", "count_parameters_shared_and_buffers"),
    M("count_parameters_ignores_trainable_only", """
def count_parameters(model, trainable_only=False):
    return sum(p.numel() for p in model.parameters())
""", "count_parameters_nested_and_frozen", "count_parameters_shared_and_buffers"),
    M("count_parameters_counts_tensors", """
def count_parameters(model, trainable_only=False):
    return len([p for p in model.parameters() if p.requires_grad or not trainable_only])
""", "count_parameters_nested_and_frozen", "count_parameters_shared_and_buffers"),
    M("count_parameters_returns_a_tensor", """
def count_parameters(model, trainable_only=False):
    return torch.tensor(sum(p.numel() for p in model.parameters()
                            if p.requires_grad or not trainable_only))
""", "count_parameters_nested_and_frozen", "count_parameters_shared_and_buffers"),

    # ------------------------------------------------------------------ RunningNorm
    M("running_norm_biased_running_var", "", *NORM_VALUES,
      replace=[("self.momentum * var * n / (n - 1)", "self.momentum * var")]),
    M("running_norm_unbiased_normalisation", "",
      *NORM_VALUES, "running_norm_gradients_match_batchnorm",
      replace=[("var = x.var(dim=0, unbiased=False)", "var = x.var(dim=0)"),
               ("self.momentum * var * n / (n - 1)", "self.momentum * var")]),
    M("running_norm_buffers_as_parameters", "",
      "running_norm_registers_parameters_and_buffers",
      replace=[('self.register_buffer("running_mean", torch.zeros(num_features))',
                "self.running_mean = nn.Parameter(torch.zeros(num_features), "
                "requires_grad=False)"),
               ('self.register_buffer("running_var", torch.ones(num_features))',
                "self.running_var = nn.Parameter(torch.ones(num_features), requires_grad=False)")]),
    M("running_norm_plain_tensor_statistics", "",
      "running_norm_registers_parameters_and_buffers",
      replace=[('self.register_buffer("running_mean", torch.zeros(num_features))',
                "self.running_mean = torch.zeros(num_features)"),
               ('self.register_buffer("running_var", torch.ones(num_features))',
                "self.running_var = torch.ones(num_features)")]),
    M("running_norm_updates_in_eval_mode", """
class RunningNorm(RunningNorm):
    def forward(self, x):
        n = x.shape[0]
        mean, var = x.mean(dim=0), x.var(dim=0, unbiased=False)
        with torch.no_grad():
            self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
            self.running_var.mul_(1 - self.momentum).add_(self.momentum * var * n / (n - 1))
        if not self.training:
            mean, var = self.running_mean, self.running_var
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias
""", "running_norm_both_modes_step_after_step"),
    M("running_norm_momentum_the_wrong_way_round", "", *NORM_VALUES,
      replace=[("self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)",
                "self.running_mean.mul_(self.momentum).add_((1 - self.momentum) * mean)"),
               ("self.running_var.mul_(1 - self.momentum).add_(self.momentum * var * n / (n - 1))",
                "self.running_var.mul_(self.momentum)"
                ".add_((1 - self.momentum) * var * n / (n - 1))")]),
    M("running_norm_default_momentum_too_small", "", "running_norm_both_modes_step_after_step",
      replace=[("momentum: float = 0.1,", "momentum: float = 0.01,")]),
    M("running_norm_eps_outside_the_sqrt", "", "running_norm_both_modes_step_after_step",
      replace=[("(x - mean) / torch.sqrt(var + self.eps)",
                "(x - mean) / (torch.sqrt(var) + self.eps)")]),
    M("running_norm_statistics_keep_the_graph", """
class RunningNorm(RunningNorm):
    def forward(self, x):
        if self.training:
            n = x.shape[0]
            mean, var = x.mean(dim=0), x.var(dim=0, unbiased=False)
            m = self.momentum
            self.running_mean = (1 - m) * self.running_mean + m * mean
            self.running_var = (1 - m) * self.running_var + m * var * n / (n - 1)
        else:
            mean, var = self.running_mean, self.running_var
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias
""", *NORM_VALUES),
    M("running_norm_detached_statistics", "", "running_norm_gradients_match_batchnorm",
      replace=[("mean = x.mean(dim=0)", "mean = x.mean(dim=0).detach()"),
               ("var = x.var(dim=0, unbiased=False)",
                "var = x.var(dim=0, unbiased=False).detach()")]),
    M("running_norm_gamma_and_beta", """
class RunningNorm(RunningNorm):
    def __init__(self, num_features, momentum=0.1, eps=1e-5):
        super().__init__(num_features, momentum, eps)
        del self.weight, self.bias
        self.gamma = nn.Parameter(torch.ones(num_features))
        self.beta = nn.Parameter(torch.zeros(num_features))

    def forward(self, x):
        self.weight, self.bias = self.gamma, self.beta
        return super().forward(x)
""", "running_norm_registers_parameters_and_buffers", *NORM_VALUES,
      "running_norm_gradients_match_batchnorm"),
    M("running_norm_calls_batch_norm", """
class RunningNorm(RunningNorm):
    def forward(self, x):
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            self.training, self.momentum, self.eps)
""", "running_norm_built_by_hand"),
    M("correct_running_norm_batchnorm_argument_order", "",
      replace=[("def __init__(self, num_features: int, momentum: float = 0.1, eps: float = 1e-5):",
                "def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1):")]),
    M("correct_running_norm_one_pass_variance", "",
      replace=[("var = x.var(dim=0, unbiased=False)", "var = (x * x).mean(dim=0) - mean * mean")]),

    # ------------------------------------------------------------------ TiedAutoencoder
    M("tied_autoencoder_two_weights", """
class TiedAutoencoder(nn.Module):
    def __init__(self, in_dim, code_dim):
        super().__init__()
        self.encoder = nn.Linear(in_dim, code_dim)
        self.decoder = nn.Linear(code_dim, in_dim)

    def forward(self, x):
        return self.decoder(torch.relu(self.encoder(x)))
""", *TIED_ALL),
    M("tied_autoencoder_bare_tensor_weight", "", *TIED_ALL,
      replace=[("self.weight = nn.Parameter(torch.empty(code_dim, in_dim))",
                "self.weight = torch.empty(code_dim, in_dim, requires_grad=True)"),
               ("nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))",
                "nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5)); "
                "self.weight.requires_grad_(True)")]),
    M("tied_autoencoder_decoder_detached", "",
      "tied_autoencoder_gradients_reach_the_shared_weight",
      replace=[("F.linear(code, self.weight.t(), self.dec_bias)",
                "F.linear(code, self.weight.detach().t(), self.dec_bias)")]),
    M("tied_autoencoder_no_relu", "",
      "tied_autoencoder_forward", "tied_autoencoder_gradients_reach_the_shared_weight",
      replace=[("code = F.relu(F.linear(x, self.weight, self.enc_bias))",
                "code = F.linear(x, self.weight, self.enc_bias)")]),

    # ------------------------------------------------------------------ param_groups
    M("param_groups_frozen_parameters_in_a_group", "",
      "param_groups_head_and_base", "param_groups_nested_head_and_frozen",
      replace=[("        if p.requires_grad:\n            (head_params",
                "        if True:\n            (head_params")]),
    M("param_groups_head_lr_swapped", "", *GROUPS_ALL,
      replace=[(GROUPS_RETURN,
                'return [{"params": base_params, "lr": head_lr}, '
                '{"params": head_params, "lr": base_lr}]')]),
    M("param_groups_prefix_without_the_dot", """
def param_groups(model, head, base_lr, head_lr):
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    return [{"params": [p for n, p in named if not n.startswith(head)], "lr": base_lr},
            {"params": [p for n, p in named if n.startswith(head)], "lr": head_lr}]
""", "param_groups_nested_head_and_frozen"),
    M("param_groups_shared_parameter_in_both", """
def param_groups(model, head, base_lr, head_lr):
    head_params = [p for p in model.get_submodule(head).parameters() if p.requires_grad]
    rest = [p for n, p in model.named_parameters()
            if p.requires_grad and not n.startswith(head + ".")]
    return [{"params": rest, "lr": base_lr}, {"params": head_params, "lr": head_lr}]
""", "param_groups_shared_parameter_in_one_group"),
    M("param_groups_frozen_head_parameters_kept", """
def param_groups(model, head, base_lr, head_lr):
    head_params = list(model.get_submodule(head).parameters())
    ids = {id(p) for p in head_params}
    rest = [p for p in model.parameters() if p.requires_grad and id(p) not in ids]
    return [{"params": rest, "lr": base_lr}, {"params": head_params, "lr": head_lr}]
""", "param_groups_nested_head_and_frozen"),
    M("param_groups_sets_of_parameters", "", *GROUPS_ALL,
      replace=[(GROUPS_RETURN,
                'return [{"params": set(base_params), "lr": base_lr}, '
                '{"params": set(head_params), "lr": head_lr}]')]),

    M("correct_param_groups_generators_head_first", """
def param_groups(model, head, base_lr, head_lr):
    sub = model.get_submodule(head)
    ids = {id(p) for p in sub.parameters()}
    return [{"params": (p for p in sub.parameters() if p.requires_grad), "lr": head_lr},
            {"params": (p for p in model.parameters() if p.requires_grad and id(p) not in ids),
             "lr": base_lr, "weight_decay": 0.0}]
"""),
    M("correct_replace_head_group_dicts", """
def replace_head(model, head, num_classes, lr):
    setattr(model, head, nn.Linear(getattr(model, head).in_features, num_classes))
    return torch.optim.SGD([{"params": [p for p in model.parameters() if p.requires_grad]}],
                           lr=lr, momentum=0.9)
"""),

    # ------------------------------------------------------------------ replace_head
    M("replace_head_optimizer_built_before_the_head", """
def replace_head(model, head, num_classes, lr):
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=lr)
    setattr(model, head, nn.Linear(getattr(model, head).in_features, num_classes))
    return optimizer
""", *HEAD_ALL),
    M("replace_head_frozen_parameters_in_the_optimizer", "", "replace_head_with_frozen_features",
      replace=[("torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=lr)",
                "torch.optim.SGD(model.parameters(), lr=lr)")]),
    M("replace_head_trains_only_the_head", "", *HEAD_ALL,
      replace=[("torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=lr)",
                "torch.optim.SGD(getattr(model, head).parameters(), lr=lr)")]),
    M("replace_head_uses_out_features", "", *HEAD_ALL,
      replace=[("nn.Linear(old.in_features, num_classes)",
                "nn.Linear(old.out_features, num_classes)")]),
    M("replace_head_attribute_name_hard_coded", "", "replace_head_with_frozen_features",
      replace=[("setattr(model, head, nn.Linear(old.in_features, num_classes))",
                "model.head = nn.Linear(old.in_features, num_classes)")]),
    M("replace_head_freezes_the_rest", "", *HEAD_ALL,
      replace=[("    old = getattr(model, head)\n",
                "    old = getattr(model, head)\n    model.requires_grad_(False)\n")]),
    M("replace_head_returns_adam", "", *HEAD_ALL,
      replace=[("torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=lr)",
                "torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)")]),
]

# Catalogued faults (grader/course/faults.toml) these mutants hold: their failing checks must say so.
DIAGNOSES = {
    "mlp_plain_list_of_layers": ["layers-in-plain-list"],
    "mlp_final_layer_created_in_forward": ["layer-created-in-forward"],
    "mlp_dropout_always_on": ["dropout-always-on"],
    "tied_autoencoder_bare_tensor_weight": ["tensor-not-parameter"],
    "replace_head_optimizer_built_before_the_head": ["optimizer-before-head-replaced"],
}
