"""Writes docs/python.md, the Python package's API reference, from its
docstrings and signatures (bindings/python/tests checks it is current).
  usage: python3 scripts/python_reference.py > docs/python.md"""
import inspect

import tfm

INTRO = '''# Python API reference

`import tfm`: libtfm's encoder-decoder transformers from Python, with numpy
arrays (or torch tensors, or anything with `__array__`) in and numpy
arrays out. Generated from the docstrings by
`python3 scripts/python_reference.py > docs/python.md`; the project's
README has a first program, `bindings/python/examples/` tutorials 004
and 003. Every C call is also reachable as `tfm.lib.tfm_...` (cffi).
'''


def signature(value):
    try:
        return str(inspect.signature(value))
    except (TypeError, ValueError):
        return ''


def place(item):
    """Classes and functions in the order the package's modules define them."""
    value = item[1]
    modules = ['tfm._core', 'tfm._model', 'tfm._text', 'tfm._translate', 'tfm']
    try:
        line = inspect.getsourcelines(value)[1]
    except (OSError, TypeError):
        line = 0
    return modules.index(value.__module__) if value.__module__ in modules else 0, line


def members(cls):
    for name, attribute in vars(cls).items():
        if name.startswith('_'):
            continue
        if isinstance(attribute, property):
            yield '`.%s`' % name, inspect.getdoc(attribute)
        elif isinstance(attribute, classmethod):
            yield '`%s.%s%s`' % (cls.__name__, name, signature(getattr(cls, name))), \
                inspect.getdoc(attribute)
        elif callable(attribute):
            yield '`.%s%s`' % (name, signature(attribute).replace('(self, ', '(')
                               .replace('(self)', '()')), inspect.getdoc(attribute)


def main():
    public = [(name, getattr(tfm, name)) for name in dir(tfm) if not name.startswith('_')
              and name not in ('ffi', 'lib') and not inspect.ismodule(getattr(tfm, name))]
    errors = [(n, v) for n, v in public if inspect.isclass(v) and issubclass(v, BaseException)]
    classes = [(n, v) for n, v in public if inspect.isclass(v) and (n, v) not in errors]
    functions = [(n, v) for n, v in public if inspect.isroutine(v)]
    print(INTRO)
    print('## Classes\n')
    for name, cls in sorted(classes, key=place):
        init = signature(cls.__init__).replace('(self, ', '(').replace('(self)', '()')
        if issubclass(cls, tuple):  # a namedtuple's
            init = '(%s)' % ', '.join(cls._fields)
        print('### tfm.%s%s\n\n%s\n' % (name, init, inspect.getdoc(cls)))
        if issubclass(cls, tuple):
            continue
        listed = ['- %s: %s' % (title, ' '.join((doc or '').split()))
                  for title, doc in members(cls)]
        if listed:
            print('\n'.join(listed) + '\n')
    print('## Functions\n')
    for name, function in sorted(functions, key=place):
        print('### tfm.%s%s\n\n%s\n' % (name, signature(function), inspect.getdoc(function)))
    print('## Errors\n')
    print('Every failed libtfm call raises a subclass of `tfm.Error` carrying its status '
          '(`status`, `status_name`) and libtfm\'s message:\n')
    for name, cls in sorted(errors, key=place):
        bases = ', '.join(b.__name__ for b in cls.__bases__)
        print('- `tfm.%s` (%s)%s' % (name, bases, ': ' + inspect.getdoc(cls)
                                     if cls.__doc__ else ''))


if __name__ == '__main__':
    main()
