import warnings

# pgserver asks platformdirs for a runtime dir; without XDG_RUNTIME_DIR it warns on every command
warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
