"""A curated lexicon of what users (and agents) say after an answer, in 26 languages.

The gateway's cheap check on its hot path (`says_wrong`, `proxy/signals.py`) and the control
plane's reading of a window's follow-ups (`cues`, `evolution/followups/`) share it, so both
hear the same words.

No model and no download: a table of phrasings per language and cue, compiled once into one
pattern per cue. The cues are the ways a follow-up says an answer did not do:

- `denial`: the answer is wrong ("that's not right", "das stimmt nicht", "不对");
- `again`: the user asks again, to repeat or confirm ("can you confirm", "otra vez", "もう一度");
- `instruction`: the user says how answers should be ("next time", "always", "zawsze");
- `thanks`: the user is satisfied ("thanks", "merci", "спасибо");
- `retraction`: the agent takes its previous answer back ("you're right", "申し訳");
- `please`: a polite request ("please", "proszę", "お願い"), which tells a request from a
  statement (not a complaint in itself).

A phrasing ending in "*" is a stem: any ending may follow it ("zopakov*": zopakovat,
zopakujte). A denial word alone ("no", "nein", "нет") counts only where a message opens
with it: inside a sentence it is ordinary negation. Scripts written without spaces
(Chinese, Japanese, Thai) and Korean (whose endings attach to the word) are matched as
substrings, the rest on word boundaries; text and lexicon are folded alike (compatibility
forms, case, accents and other combining marks), so "nao" finds "não".

The languages: English, German, French, Spanish, Italian, Portuguese, Dutch, Polish,
Swedish, Danish, Norwegian, Finnish, Czech, Turkish, Russian, Ukrainian, Greek, Arabic,
Hebrew, Hindi, Japanese, Chinese, Korean, Indonesian, Vietnamese and Thai. Adding one is a
row per cue below; `tests/evolution/test_followups.py` reads a denial and a request
again back in each.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cache

__all__ = ["LANGUAGES", "Cue", "cues", "fold", "says_wrong"]


class Cue(StrEnum):
    DENIAL = "denial"
    AGAIN = "again"
    INSTRUCTION = "instruction"
    THANKS = "thanks"
    RETRACTION = "retraction"
    PLEASE = "please"  # a polite request: not a complaint, but what makes words a request


# Words that deny only when a message opens with them.
_OPENERS: Mapping[str, str] = {
    "en": "no|nope|nah|wrong|incorrect|actually",
    "de": "nein|nee|falsch|eigentlich",
    "fr": "non|faux|en fait",
    "es": "no|incorrecto|falso|en realidad",
    "it": "no|sbagliato",
    "pt": "não|errado",
    "nl": "nee|fout",
    "pl": "nie|źle",
    "sv": "nej|fel",
    "da": "nej|forkert",
    "no": "nei|feil",
    "fi": "ei|väärin",
    "cs": "ne|špatně",
    "tr": "hayır|yanlış",
    "ru": "нет|неверно|неправильно",
    "uk": "ні|неправильно",
    "el": "όχι|λάθος",
    "ar": "لا|خطأ",
    "he": "לא|שגוי",
    "hi": "नहीं|गलत",
    "ja": "いいえ|いや|違",
    "zh": "不对|不是",
    "ko": "아니|아뇨|틀렸",
    "id": "tidak|bukan|salah",
    "vi": "không|sai",
    "th": "ไม่|ผิด",
}

# Phrasings per language and cue, separated by "|"; each is found anywhere in a message.
_PHRASES: Mapping[str, Mapping[Cue, str]] = {
    "en": {
        Cue.DENIAL: "that's wrong|that is wrong|that's not right|that is not right|not correct"
        "|that's incorrect|that is incorrect|not true|you're wrong|you are wrong|not what i"
        "|you got it wrong|you misunderstood|that's not it|doesn't match|does not match",
        Cue.AGAIN: "again|repeat*|once more|confirm*|i said|i already|as i said|i told you"
        "|still not|still doesn't|still don't|did you get|you didn't say|you did not say",
        Cue.INSTRUCTION: "next time|from now on|in future|in the future|always|make sure"
        "|don't forget|do not forget|remember to|you forgot|you didn't|you did not"
        "|you should have|you never",
        Cue.THANKS: "thanks|thank you|thx|great|perfect|awesome|that works|that helps|cheers",
        Cue.RETRACTION: "you're right|you are right|my mistake|my apologies|i apologize"
        "|i apologise|i was wrong|i made a mistake|sorry for the confusion|correction:"
        "|let me correct",
        Cue.PLEASE: "please|pls|could you|can you|would you",
    },
    "de": {
        Cue.DENIAL: "stimmt nicht|ist falsch|nicht richtig|nicht korrekt|das ist falsch"
        "|sie irren|du irrst|nicht das, was|nicht was ich",
        Cue.AGAIN: "nochmal|noch einmal|wiederholen*|bestätigen*|bestätigen sie|ich sagte"
        "|ich habe doch|schon gesagt|immer noch nicht",
        Cue.INSTRUCTION: "nächstes mal|künftig|in zukunft|ab jetzt|immer|denken sie daran"
        "|vergessen sie nicht|sie haben vergessen|du hast vergessen",
        Cue.THANKS: "danke|vielen dank|super|perfekt|passt|prima|klasse",
        Cue.RETRACTION: "entschuldigung|entschuldigen sie|sie haben recht|du hast recht"
        "|mein fehler|korrektur|ich habe mich geirrt",
        Cue.PLEASE: "bitte|können sie|könnten sie|kannst du",
    },
    "fr": {
        Cue.DENIAL: "c'est faux|pas correct|pas juste|incorrect|ce n'est pas ça"
        "|vous vous trompez|tu te trompes|pas ce que",
        Cue.AGAIN: "encore une fois|répét*|confirm*|j'ai dit|déjà dit|toujours pas|de nouveau",
        Cue.INSTRUCTION: "la prochaine fois|à l'avenir|désormais|toujours|n'oubliez pas"
        "|vous avez oublié|tu as oublié|merci de",
        Cue.THANKS: "merci|parfait|super|génial|très bien",
        Cue.RETRACTION: "désolé|désolée|pardon|vous avez raison|tu as raison|mon erreur"
        "|je me suis trompé|toutes mes excuses",
        Cue.PLEASE: "s'il vous plaît|s'il te plaît|svp|pouvez-vous|pourriez-vous|merci de",
    },
    "es": {
        Cue.DENIAL: "no es correcto|incorrecto|no es así|eso no es|está mal|no es cierto"
        "|se equivoca|te equivocas|no es lo que",
        Cue.AGAIN: "otra vez|de nuevo|repetir*|repita*|repite*|confirmar*|confirme*|confirma*"
        "|ya le dije|ya dije|le dije|sigue sin|todavía no",
        Cue.INSTRUCTION: "la próxima vez|en adelante|a partir de ahora|siempre|no olvide"
        "|no olvides|olvidó|olvidaste|asegúrese|asegúrate",
        Cue.THANKS: "gracias|perfecto|genial|excelente|muy bien",
        Cue.RETRACTION: "disculpe|perdón|lo siento|tiene razón|tienes razón|me equivoqué|mi error",
        Cue.PLEASE: "por favor|puede|podría|podrías",
    },
    "it": {
        Cue.DENIAL: "non è corretto|sbagliato|non è giusto|non è vero|si sbaglia|ti sbagli"
        "|non è quello",
        Cue.AGAIN: "di nuovo|ancora una volta|ripetere*|ripeta*|ripeti*|confermare*|confermi*"
        "|conferma*|ho detto|ancora non|già detto",
        Cue.INSTRUCTION: "la prossima volta|d'ora in poi|in futuro|sempre|non dimentichi"
        "|non dimenticare|ha dimenticato|hai dimenticato|si ricordi",
        Cue.THANKS: "grazie|perfetto|ottimo|benissimo",
        Cue.RETRACTION: "mi scusi|scusa|ha ragione|hai ragione|mi sono sbagliato|errore mio",
        Cue.PLEASE: "per favore|per piacere|potrebbe|potresti|può",
    },
    "pt": {
        Cue.DENIAL: "não está certo|não é isso|está errado|incorreto|não é verdade"
        "|você se enganou|não é o que",
        Cue.AGAIN: "de novo|novamente|repetir*|repita*|confirmar*|confirme*|confirma*|eu disse"
        "|já disse|ainda não",
        Cue.INSTRUCTION: "da próxima vez|a partir de agora|no futuro|sempre|não esqueça"
        "|não se esqueça|esqueceu|lembre-se",
        Cue.THANKS: "obrigado|obrigada|valeu|perfeito|ótimo",
        Cue.RETRACTION: "desculpe|desculpa|tem razão|você está certo|me enganei|meu erro",
        Cue.PLEASE: "por favor|pode|poderia",
    },
    "nl": {
        Cue.DENIAL: "klopt niet|is fout|niet juist|niet correct|dat is niet|niet wat ik",
        Cue.AGAIN: "opnieuw|nog een keer|nogmaals|herhaal*|bevestig*|ik zei|nog steeds niet",
        Cue.INSTRUCTION: "volgende keer|voortaan|in de toekomst|altijd|vergeet niet"
        "|je bent vergeten|u bent vergeten",
        Cue.THANKS: "dank je|dank u|bedankt|perfect|top|prima",
        Cue.RETRACTION: "excuses|u heeft gelijk|je hebt gelijk|mijn fout|mijn excuses",
        Cue.PLEASE: "alsjeblieft|alstublieft|graag|kunt u|kun je",
    },
    "pl": {
        Cue.DENIAL: "nieprawda|niepoprawnie|to jest źle|to nie tak|błędnie|pomyłka|pomylił",
        Cue.AGAIN: "jeszcze raz|ponownie|powtórz*|potwierdź*|potwierdzić*|mówiłem|mówiłam"
        "|nadal nie|wciąż nie",
        Cue.INSTRUCTION: "następnym razem|od teraz|w przyszłości|zawsze|nie zapomnij"
        "|zapomniał|pamiętaj",
        Cue.THANKS: "dziękuję|dzięki|świetnie|super|doskonale",
        Cue.RETRACTION: "przepraszam|ma pan rację|ma pani rację|masz rację|mój błąd",
        Cue.PLEASE: "proszę|czy może pan|czy możesz",
    },
    "sv": {
        Cue.DENIAL: "stämmer inte|det är fel|inte rätt|inte korrekt",
        Cue.AGAIN: "igen|en gång till|upprepa*|bekräfta*|jag sa|fortfarande inte",
        Cue.INSTRUCTION: "nästa gång|hädanefter|i framtiden|alltid|glöm inte|du glömde",
        Cue.THANKS: "tack|perfekt|toppen|utmärkt",
        Cue.RETRACTION: "förlåt|ursäkta|du har rätt|mitt fel",
        Cue.PLEASE: "snälla|vänligen|kan du",
    },
    "da": {
        Cue.DENIAL: "det passer ikke|det er forkert|ikke rigtigt|ikke korrekt",
        Cue.AGAIN: "igen|en gang til|gentag*|bekræft*|jeg sagde|stadig ikke",
        Cue.INSTRUCTION: "næste gang|fremover|i fremtiden|altid|glem ikke|du glemte",
        Cue.THANKS: "tak|perfekt|fint",
        Cue.RETRACTION: "undskyld|du har ret|min fejl",
        Cue.PLEASE: "venligst|kan du",
    },
    "no": {
        Cue.DENIAL: "stemmer ikke|det er feil|ikke riktig|ikke korrekt",
        Cue.AGAIN: "igjen|en gang til|gjenta*|bekreft*|jeg sa|fortsatt ikke",
        Cue.INSTRUCTION: "neste gang|heretter|i fremtiden|alltid|ikke glem|du glemte",
        Cue.THANKS: "takk|perfekt|supert",
        Cue.RETRACTION: "beklager|unnskyld|du har rett|min feil",
        Cue.PLEASE: "vennligst|kan du",
    },
    "fi": {
        Cue.DENIAL: "ei pidä paikkaansa|väärin|ei ole oikein|virheellinen",
        Cue.AGAIN: "uudelleen|taas|toista*|toistaa|vahvist*|sanoin|vieläkään",
        Cue.INSTRUCTION: "ensi kerralla|jatkossa|tulevaisuudessa|aina|muista|unohdit",
        Cue.THANKS: "kiitos|täydellistä|loistavaa",
        Cue.RETRACTION: "anteeksi|olet oikeassa|olette oikeassa|virheeni",
        Cue.PLEASE: "ole hyvä|voisitko|voisitteko|pyydän",
    },
    "cs": {
        Cue.DENIAL: "to není pravda|není správně|špatně|chybně|to je chyba",
        Cue.AGAIN: "znovu|ještě jednou|zopakuj*|zopakov*|potvrď*|potvrd*|říkal jsem"
        "|říkala jsem|pořád ne",
        Cue.INSTRUCTION: "příště|odteď|v budoucnu|vždy|nezapomeň|nezapomeňte|zapomněl",
        Cue.THANKS: "děkuji|díky|skvělé|výborně",
        Cue.RETRACTION: "omlouvám|máte pravdu|máš pravdu|moje chyba",
        Cue.PLEASE: "prosím|můžete|mohl byste",
    },
    "tr": {
        Cue.DENIAL: "yanlış|doğru değil|öyle değil|hatalı",
        Cue.AGAIN: "tekrar|yine|yeniden|onayla*|teyit*|dedim",
        Cue.INSTRUCTION: "bir dahaki sefere|bundan sonra|gelecekte|her zaman|asla|unutma"
        "|unuttun|unuttunuz",
        Cue.THANKS: "teşekkür|sağ ol|sağol|harika|mükemmel",
        Cue.RETRACTION: "özür|kusura bakma|haklısınız|haklısın|hatam",
        Cue.PLEASE: "lütfen|rica ederim",
    },
    "ru": {
        Cue.DENIAL: "неправильно|неверно|не так|неправда|это ошибка|вы ошиблись",
        Cue.AGAIN: "ещё раз|еще раз|снова|опять|повтор*|подтверд*|я же сказал|я сказал"
        "|я уже|до сих пор не|всё ещё не|все еще не",
        Cue.INSTRUCTION: "в следующий раз|впредь|отныне|в будущем|всегда|никогда"
        "|не забыв|не забудьте|забыли|обязательно",
        Cue.THANKS: "спасибо|отлично|супер|прекрасно",
        Cue.RETRACTION: "извините|простите|вы правы|ты прав|моя ошибка|я ошиб",
        Cue.PLEASE: "пожалуйста|прошу|не могли бы",
    },
    "uk": {
        Cue.DENIAL: "неправильно|невірно|не так|неправда|помилка",
        Cue.AGAIN: "ще раз|знову|повтор*|підтверд*|я сказав|я сказала|досі не",
        Cue.INSTRUCTION: "наступного разу|надалі|відтепер|завжди|ніколи|не забува|забули",
        Cue.THANKS: "дякую|чудово|відмінно",
        Cue.RETRACTION: "вибачте|перепрошую|ви праві|моя помилка",
        Cue.PLEASE: "будь ласка|прошу",
    },
    "el": {
        Cue.DENIAL: "λάθος|δεν είναι σωστό|δεν ισχύει|λανθασμένο",
        Cue.AGAIN: "ξανά|επανάλαβε*|επαναλάβετε*|επιβεβαίω*|είπα|ακόμα δεν",
        Cue.INSTRUCTION: "την επόμενη φορά|από εδώ και πέρα|στο μέλλον|πάντα|ποτέ"
        "|μην ξεχνάς|μην ξεχνάτε|ξέχασες|ξεχάσατε",
        Cue.THANKS: "ευχαριστώ|τέλεια|τέλειο|υπέροχα",
        Cue.RETRACTION: "συγγνώμη|έχετε δίκιο|έχεις δίκιο|λάθος μου",
        Cue.PLEASE: "παρακαλώ",
    },
    "ar": {
        Cue.DENIAL: "خطأ|غير صحيح|ليس صحيحا|ليس صحيح|هذا غلط|غلط",
        Cue.AGAIN: "مرة أخرى|مره اخرى|كرر|أعد|أكد|تأكيد|قلت لك|قلت|ما زال",
        Cue.INSTRUCTION: "في المرة القادمة|من الآن|في المستقبل|دائما|أبدا|لا تنس|نسيت",
        Cue.THANKS: "شكرا|ممتاز|رائع",
        Cue.RETRACTION: "عذرا|آسف|أنت محق|معك حق|خطئي",
        Cue.PLEASE: "من فضلك|رجاء|لو سمحت",
    },
    "he": {
        Cue.DENIAL: "לא נכון|שגוי|טעות",
        Cue.AGAIN: "שוב|עוד פעם|תחזור|תחזרי|תאשר|תאשרי|אמרתי|עדיין לא",
        Cue.INSTRUCTION: "בפעם הבאה|מעכשיו|בעתיד|תמיד|אף פעם|אל תשכח|אל תשכחי|שכחת",
        Cue.THANKS: "תודה|מעולה|מושלם",
        Cue.RETRACTION: "סליחה|מצטער|מצטערת|אתה צודק|את צודקת|טעות שלי",
        Cue.PLEASE: "בבקשה|אנא",
    },
    "hi": {
        Cue.DENIAL: "गलत|ग़लत|सही नहीं|ठीक नहीं",
        Cue.AGAIN: "फिर से|दोबारा|दुबारा|पुष्टि|मैंने कहा|अभी भी नहीं",
        Cue.INSTRUCTION: "अगली बार|अब से|भविष्य में|हमेशा|कभी नहीं|मत भूलना|भूल गए",
        Cue.THANKS: "धन्यवाद|शुक्रिया|बढ़िया|बहुत अच्छा",
        Cue.RETRACTION: "माफ़|माफ|क्षमा|आप सही|मेरी गलती",
        Cue.PLEASE: "कृपया|प्लीज़",
    },
    "ja": {
        Cue.DENIAL: "違います|違う|ちがう|間違|正しくない|そうではない|そうじゃない",
        Cue.AGAIN: "もう一度|再度|繰り返|確認|言いました|言ったのに",
        Cue.INSTRUCTION: "次回|今後|これから|いつも|必ず|常に|忘れ",
        Cue.THANKS: "ありがとう|完璧|助かりました|了解しました",
        Cue.RETRACTION: "申し訳|すみません|ごめん|おっしゃる通り|失礼しました|訂正",
        Cue.PLEASE: "お願い|ください|下さい",
    },
    "zh": {
        Cue.DENIAL: "不对|不是这样|错了|搞错|不正确|有误",
        Cue.AGAIN: "再说一遍|再一次|重新|重复|确认|我说过|我已经说|还是没",
        Cue.INSTRUCTION: "下次|今后|以后都|以后请|总是|一定要|务必|别忘|忘了",
        Cue.THANKS: "谢谢|多谢|完美|太好了",
        Cue.RETRACTION: "抱歉|对不起|不好意思|你说得对|您说得对|我错了|更正",
        Cue.PLEASE: "请|麻烦",
    },
    "ko": {
        Cue.DENIAL: "틀렸|아닙니다|아니에요|잘못|맞지 않",
        Cue.AGAIN: "다시|한 번 더|반복|확인|말했|아직도",
        Cue.INSTRUCTION: "다음에|다음부터|앞으로|항상|절대|잊지|잊었|반드시",
        Cue.THANKS: "감사|고맙|완벽",
        Cue.RETRACTION: "죄송|미안|맞습니다|말씀이 맞|제 실수|정정",
        Cue.PLEASE: "주세요|부탁|해 주",
    },
    "id": {
        Cue.DENIAL: "salah|tidak benar|bukan itu|keliru",
        Cue.AGAIN: "sekali lagi|ulangi*|konfirmasi*|saya bilang|sudah bilang|masih belum",
        Cue.INSTRUCTION: "lain kali|mulai sekarang|ke depan|selalu|jangan pernah|jangan lupa|lupa",
        Cue.THANKS: "terima kasih|makasih|sempurna|mantap",
        Cue.RETRACTION: "maaf|anda benar|kamu benar|kesalahan saya",
        Cue.PLEASE: "tolong|mohon|silakan",
    },
    "vi": {
        Cue.DENIAL: "không đúng|sai rồi|không phải",
        Cue.AGAIN: "một lần nữa|nhắc lại|xác nhận|tôi đã nói|vẫn chưa",
        Cue.INSTRUCTION: "lần sau|từ giờ|từ nay|luôn luôn|không bao giờ|đừng quên|quên",
        Cue.THANKS: "cảm ơn|tuyệt|hoàn hảo",
        Cue.RETRACTION: "xin lỗi|bạn đúng|bạn nói đúng|tôi nhầm",
        Cue.PLEASE: "làm ơn|vui lòng|xin hãy",
    },
    "th": {
        Cue.DENIAL: "ไม่ถูก|ผิด",
        Cue.AGAIN: "อีกครั้ง|ซ้ำ|ยืนยัน|บอกแล้ว",
        Cue.INSTRUCTION: "ครั้งหน้า|ต่อไปนี้|ในอนาคต|เสมอ|ทุกครั้ง|อย่าลืม|ลืม",
        Cue.THANKS: "ขอบคุณ|เยี่ยม|สมบูรณ์แบบ",
        Cue.RETRACTION: "ขอโทษ|ขออภัย|คุณพูดถูก",
        Cue.PLEASE: "กรุณา|ช่วย",
    },
}

LANGUAGES = tuple(_PHRASES)
# Scripts written without spaces between words: their phrasings match as substrings.
_UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\u0e00-\u0e7f\uac00-\ud7af]")


def fold(text: str) -> str:
    """Text as the lexicon reads it: compatibility forms, case, and combining marks folded
    (the same fold is applied to the lexicon's own phrasings)."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    kept = "".join(char for char in decomposed if not unicodedata.combining(char))
    return unicodedata.normalize("NFC", kept).replace("’", "'")


_TOKEN = re.compile(r"\w+")


@dataclass(frozen=True)
class _Table:
    """One cue's phrasings, indexed for a pass over a message's words: spaced phrasings by
    their first word (a stem's by its first three letters), unspaced ones as substrings."""

    by_word: dict[str, list[tuple[tuple[str, ...], bool]]]
    unspaced: tuple[str, ...]


def _table(phrases: Iterable[str]) -> _Table:
    by_word: dict[str, list[tuple[tuple[str, ...], bool]]] = {}
    unspaced = []
    for phrase in {fold(p.strip()) for p in phrases if p.strip()}:
        stem = phrase.endswith("*")  # a stem: any ending may follow ("zopakov*")
        words = tuple(_TOKEN.findall(phrase.rstrip("*")))
        if _UNSPACED.search(phrase):
            unspaced.append(phrase.rstrip("*").replace(" ", ""))
        elif words:
            key = words[0][:3] if stem and len(words) == 1 else words[0]
            by_word.setdefault(key, []).append((words, stem))
    return _Table(by_word, tuple(unspaced))


def _found(table: _Table, words: list[str], text: str, *, first_only: bool = False) -> bool:
    """Whether a phrasing of `table` is in the message (its `words`, its folded `text`);
    `first_only`: only where the message opens with it."""
    for index, word in enumerate(words[:1] if first_only else words):
        for phrase, stem in table.by_word.get(word, []) + table.by_word.get(word[:3], []):
            if _matches(phrase, stem, words, index):
                return True
    if not table.unspaced or not _UNSPACED.search(text):
        return False
    squeezed = text.replace(" ", "")
    if first_only:
        opening = _TOKEN.search(squeezed)
        return opening is not None and any(
            squeezed[opening.start() :].startswith(p) for p in table.unspaced
        )
    return any(phrase in squeezed for phrase in table.unspaced)


def _matches(phrase: tuple[str, ...], stem: bool, words: list[str], at: int) -> bool:
    end = at + len(phrase)
    if end > len(words):
        return False
    if words[at : end - 1] != list(phrase[:-1]):
        return False
    last = words[end - 1]
    return last.startswith(phrase[-1]) if stem else last == phrase[-1]


@cache
def _tables() -> dict[Cue, _Table]:
    return {
        cue: _table(p for table in _PHRASES.values() for p in table.get(cue, "").split("|"))
        for cue in Cue
    }


@cache
def _openers() -> _Table:
    return _table(w for alternatives in _OPENERS.values() for w in alternatives.split("|"))


def says_wrong(text: str) -> bool:
    """The gateway's cheap check: the message denies the answer or asks again (one pass
    over its words per table)."""
    folded = fold(text)
    words = _TOKEN.findall(folded)
    tables = _tables()
    return (
        _found(_openers(), words, folded, first_only=True)
        or _found(tables[Cue.DENIAL], words, folded)
        or _found(tables[Cue.AGAIN], words, folded)
    )


def cues(text: str) -> frozenset[Cue]:
    """The cues a message carries, in any of the lexicon's languages."""
    folded = fold(text)
    words = _TOKEN.findall(folded)
    found = {cue for cue, table in _tables().items() if _found(table, words, folded)}
    if _found(_openers(), words, folded, first_only=True):
        found.add(Cue.DENIAL)
    return frozenset(found)
